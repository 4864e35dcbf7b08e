#include "tokens/object_file.hpp"

#include "tokens/token_file.hpp"

#include "remote/s3_settings.hpp"
#include "util/concurrent_jobs.hpp"
#include "util/environment.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

namespace backplane::detail {
namespace {

// Parts of a download: large enough that a request's overhead is small
// beside its transfer, small enough that 8 keep a link busy.
constexpr std::uint64_t kPartBytes = 8u << 20;
constexpr std::size_t kPartsInFlight = 8;

std::unique_ptr<ObjectClient> client_for_process() {
  return std::make_unique<ObjectClient>(read_s3_settings(Environment::process()), RetryPolicy{});
}

}  // namespace

ObjectFile::ObjectFile(const std::string& url)
    : client_(client_for_process()), url_(parse_object_url(url)), info_(client_->stat(url_)) {}

void ObjectFile::read(std::uint64_t offset, std::span<std::byte> out) { client_->read(url_, info_, offset, out); }

std::shared_ptr<const TokenFileMapping> ObjectFile::download() {
  void* base = ::mmap(nullptr, static_cast<std::size_t>(info_.size), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("{}: no memory for the object's {} bytes", url_.shown, info_.size));
  }
  // Owned from here: an error below unmaps it.
  auto mapping = std::make_shared<const TokenFileMapping>(static_cast<std::byte*>(base), info_.size);
  auto* bytes = static_cast<std::byte*>(base);
  const std::uint64_t parts = (info_.size + kPartBytes - 1) / kPartBytes;
  run_concurrently(static_cast<std::size_t>(parts), kPartsInFlight, "bp-download", [&](std::size_t part) {
    const std::uint64_t begin = part * kPartBytes;
    const std::uint64_t length = std::min(kPartBytes, info_.size - begin);
    client_->read(url_, info_, begin, {bytes + begin, static_cast<std::size_t>(length)});
  });
  ::mprotect(base, static_cast<std::size_t>(info_.size), PROT_READ);
  return mapping;
}

bool object_exists(const std::string& url) {
  try {
    ObjectFile file(url);
    return true;
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kNotFound) return false;
    throw;
  }
}

}  // namespace backplane::detail
