// The streamed path of load(): file -> staging ring -> device, through the
// staged-upload pipeline that device_put uses (placement/staging.hpp).
//
// Why not device_put over the mapping: it would copy each tensor on its own
// (a pipeline per tensor, so a model of many small tensors gets no overlap),
// and filling staging from a mapping takes a page fault per 4 KiB where pread
// gets the kernel's read-ahead. So a slot here packs the tail of one tensor
// and the heads of the next ones, read with one pread per run of adjacent
// tensors, and each piece is sent to its own tensor's buffer.
#include "safetensors/loader.hpp"

#include "placement/array_state.hpp"
#include "placement/staging.hpp"
#include "safetensors/text.hpp"
#include "trace/trace.hpp"
#include "util/bytes.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace backplane::safetensors::detail {
namespace {

using ::backplane::detail::Block;
using ::backplane::detail::describe_bytes;
using ::backplane::detail::LiveDevice;
using ::backplane::detail::StagedUpload;
namespace trace = ::backplane::detail::trace;

// A piece of one tensor staged in a slot.
struct Piece {
  std::size_t tensor;
  std::uint64_t within;  // offset in the tensor
  std::uint64_t size;
  std::uint64_t staged;  // offset in the slot
};

class Stream {
 public:
  Stream(const MappedFile& file, LiveDevice& device, const std::vector<const TensorEntry*>& tensors,
         const std::vector<std::shared_ptr<Block>>& destinations, std::uint64_t total, const ProgressCallback& progress)
      : file_(file),
        device_(device),
        tensors_(tensors),
        destinations_(destinations),
        upload_(device, total, progress, [this](std::uint64_t tensor, std::uint64_t, std::uint64_t size) {
          return fmt::format("{}: loading tensor {} onto {}: copy of {} failed", file_.name(),
                             quote(tensors_[tensor]->name), device_.selector(), describe_bytes(size));
        }) {}

  void run() {
    while (tensor_ < tensors_.size()) fill(upload_.next_slot());  // the read overlaps the other slots' copies
    upload_.finish();
  }

 private:
  // Packs the next slot's worth of the selected tensors into `slot`, then
  // sends each piece to its tensor's buffer.
  void fill(std::byte* slot) {
    auto reading = trace::Span::nested(trace::category::kFileRead, trace::event::kRead);
    pieces_.clear();
    std::uint64_t used = 0;
    while (used < upload_.slot_size() && tensor_ < tensors_.size()) {
      const std::uint64_t size = tensors_[tensor_]->byte_size();
      const std::uint64_t n = std::min(upload_.slot_size() - used, size - within_);
      if (n != 0) pieces_.push_back(Piece{tensor_, within_, n, used});
      used += n;
      within_ += n;
      if (within_ == size) {
        ++tensor_;
        within_ = 0;
      }
    }
    const std::uint64_t data_offset = file_.header().data_offset;
    auto file_offset = [&](const Piece& piece) { return data_offset + tensors_[piece.tensor]->begin + piece.within; };
    for (std::size_t first = 0; first < pieces_.size();) {
      std::size_t last = first;
      while (last + 1 < pieces_.size() &&
             file_offset(pieces_[last]) + pieces_[last].size == file_offset(pieces_[last + 1])) {
        ++last;
      }
      const std::uint64_t begin = file_offset(pieces_[first]);
      file_.read(begin, slot + pieces_[first].staged, file_offset(pieces_[last]) + pieces_[last].size - begin);
      first = last + 1;
    }
    if (reading.active()) {
      reading.arg({"bytes", used});
      reading.arg({"file", file_.name()});
    }
    for (const Piece& piece : pieces_) {
      try {
        upload_.send(destinations_[piece.tensor]->buffer(), piece.within, piece.staged, piece.size, piece.tensor);
      } catch (const Error& error) {
        throw Error(error.code(), fmt::format("{}: loading tensor {} onto {}: {}", file_.name(),
                                              quote(tensors_[piece.tensor]->name), device_.selector(), error.what()));
      }
    }
  }

  const MappedFile& file_;
  LiveDevice& device_;
  const std::vector<const TensorEntry*>& tensors_;
  const std::vector<std::shared_ptr<Block>>& destinations_;
  StagedUpload upload_;
  std::vector<Piece> pieces_;
  std::size_t tensor_ = 0;  // the next byte to stage: tensors_[tensor_] at within_
  std::uint64_t within_ = 0;
};

}  // namespace

std::vector<Array> stream_tensors(::backplane::detail::Placement& placement, const MappedFile& file,
                                  const std::shared_ptr<LiveDevice>& device,
                                  const std::vector<const TensorEntry*>& tensors, const ProgressCallback& progress) {
  // Every destination before the first read: out of memory is thrown before
  // any data moves (and what was allocated goes back to the cache).
  std::vector<std::shared_ptr<Block>> destinations;
  destinations.reserve(tensors.size());
  std::uint64_t total = 0;
  for (const TensorEntry* tensor : tensors) {
    destinations.push_back(device->memory().allocate(tensor->byte_size()));
    total += tensor->byte_size();
  }
  if (total == 0) {
    if (progress) progress(0, 0);
  } else {
    const std::uint64_t first = file.header().data_offset + tensors.front()->begin;
    file.advise_sequential(first, file.header().data_offset + tensors.back()->end - first);
    trace::Span loading(trace::category::kHostToDevice, trace::event::kStreamLoad, total);
    Stream(file, *device, tensors, destinations, total, progress).run();
    if (loading.active()) {
      const auto end = trace::Clock::now();
      const double seconds = std::chrono::duration<double>(end - loading.begin()).count();
      loading.end({},
                  {{"bytes", total},
                   {"tensors", tensors.size()},
                   {"file", file.name()},
                   {"route", "streamed"},
                   {"source", "file"},
                   {"target", device->selector()},
                   {"device", device->selector()},
                   {"gbps", seconds > 0 ? static_cast<double>(total) / seconds / 1e9 : 0.0}},
                  end);
    }
  }

  std::vector<Array> arrays;
  arrays.reserve(tensors.size());
  for (std::size_t index = 0; index < tensors.size(); ++index) {
    const TensorEntry& tensor = *tensors[index];
    const DType dtype = dtype_of(tensor);
    std::vector<std::int64_t> shape = array_shape(tensor, file.name());
    const auto extent = ::backplane::detail::extent_of(dtype, shape, "safetensors::load");
    arrays.push_back(::backplane::detail::make_result(placement, device, destinations[index], nullptr, dtype,
                                                      std::move(shape), extent));
  }
  return arrays;
}

}  // namespace backplane::safetensors::detail
