#include "placement/staging.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace backplane::detail {

StagingBuffer::StagingBuffer(CachingAllocator* pinned, std::uint64_t size) {
  if (pinned != nullptr) {
    std::shared_ptr<Block> block = pinned->allocate(size);
    data_ = block->address();
    owner_ = std::move(block);
  } else {
    std::shared_ptr<std::byte[]> heap(new std::byte[std::max<std::uint64_t>(size, 1)]);
    data_ = heap.get();
    owner_ = std::move(heap);
  }
}

StagedUpload::StagedUpload(LiveDevice& to, std::uint64_t total, ProgressCallback progress, Label label,
                           const LiveDevice* fallback)
    : to_(to), total_(total), progress_(std::move(progress)), label_(std::move(label)) {
  if (total == 0) return;  // nothing to stage: no slots, and finish() reports (0, 0)
  slot_size_ = std::min(kStagingChunk, total);
  depth_ = std::min(kRingDepth, (total + slot_size_ - 1) / slot_size_);
  // Pinned slots come from the device's cache, so a device keeps reusing the
  // same few staging buffers across transfers.
  CachingAllocator* pinned = to.pinned() != nullptr || fallback == nullptr ? to.pinned() : fallback->pinned();
  buffers_.reserve(depth_);
  for (std::uint64_t index = 0; index < depth_; ++index) {
    buffers_.emplace_back(pinned, slot_size_);
    slots_[index].memory = buffers_.back().data();
    if (trace::enabled()) slots_[index].lane = trace::LaneHold(fmt::format("{} staging", to.selector()));
  }
}

StagedUpload::~StagedUpload() {
  // Nothing may still read a slot when it goes back to the cache: dropping
  // an event waits for its copy.
  for (Slot& slot : slots_) slot.copies.clear();
}

std::byte* StagedUpload::next_slot() {
  Slot& slot = slots_[filled_ % depth_];
  ++filled_;
  retire(slot);
  return slot.memory;
}

void StagedUpload::send(BP_Buffer* destination, std::uint64_t offset, std::uint64_t staged, std::uint64_t size,
                        std::uint64_t tag) {
  Slot& slot = slots_[(filled_ - 1) % depth_];
  Copy copy{PluginEvent(), tag, offset, size, trace::Span(trace::category::kStaging, trace::event::kCopy, size)};
  copy.event = to_.copy_to_device_async(destination, offset, slot.memory + staged, size);
  slot.copies.push_back(std::move(copy));
}

void StagedUpload::finish() {
  // Slots retire in the order they were filled: copies complete in order.
  for (std::uint64_t left = 0; left < depth_; ++left) retire(slots_[(filled_ + left) % depth_]);
  if (total_ == 0 && progress_) progress_(0, 0);
}

void StagedUpload::retire(Slot& slot) {
  std::optional<Error> failure;
  std::uint64_t arrived = 0;
  for (Copy& copy : slot.copies) {
    try {
      copy.event.wait([&] { return label_(copy.tag, copy.offset, copy.size); });
    } catch (const Error& error) {
      if (!failure) failure.emplace(error);  // the first is reported; the later copies are still waited for
    }
    arrived += copy.size;
    if (slot.lane.held() && copy.span.active()) {
      copy.span.end(slot.lane.track(), {{"bytes", copy.size}, {"offset", copy.offset}, {"device", to_.selector()}});
    } else {
      copy.span.discard();  // recording began after this upload did: it has no lane
    }
  }
  slot.copies.clear();
  if (failure) throw *failure;
  if (arrived == 0) return;
  done_ += arrived;
  if (progress_) progress_(done_, total_);
}

}  // namespace backplane::detail
