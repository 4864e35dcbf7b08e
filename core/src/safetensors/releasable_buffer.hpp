// A byte buffer in pages of its own (an anonymous mapping), whose front can
// be handed back to the kernel while the rest is still in use: reading a
// 100 MB header, the parser releases the text behind it, so the text and
// the tensors parsed from it are never resident whole at the same time.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <new>
#include <span>

namespace backplane::safetensors::detail {

class ReleasableBuffer {
 public:
  explicit ReleasableBuffer(std::size_t size) : size_(size) {
    void* address = ::mmap(nullptr, size_ == 0 ? 1 : size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(address);
  }
  ~ReleasableBuffer() { ::munmap(data_, size_ == 0 ? 1 : size_); }
  ReleasableBuffer(const ReleasableBuffer&) = delete;
  ReleasableBuffer& operator=(const ReleasableBuffer&) = delete;

  std::byte* data() { return data_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

  // The bytes before `offset` will not be read again: their whole pages go
  // back to the kernel (reading them afterwards would give zeros).
  void release_before(std::size_t offset) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t end = offset / page * page;
    if (end <= released_) return;
    ::madvise(data_ + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_;
  std::size_t released_ = 0;
};

}  // namespace backplane::safetensors::detail
