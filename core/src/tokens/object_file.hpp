// A token file that is an object (s3://, http://, https://): its size and
// ETag from one HEAD, its header from ranged GETs, and, to map it, the whole
// object read into anonymous memory by ranged GETs in parallel, all of one
// version of the object (If-Match on its ETag).
#pragma once

#include "remote/object_client.hpp"
#include "remote/object_url.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace backplane::detail {

class TokenFileMapping;

class ObjectFile {
 public:
  // One HEAD. Throws what ObjectClient::stat throws (kNotFound for a
  // missing object), and kConfig for unreadable AWS settings.
  explicit ObjectFile(const std::string& url);

  const std::string& name() const noexcept { return url_.shown; }
  std::uint64_t size() const noexcept { return info_.size; }
  void read(std::uint64_t offset, std::span<std::byte> out);
  // The whole object, read-only, in memory of its own.
  std::shared_ptr<const TokenFileMapping> download();

 private:
  std::unique_ptr<ObjectClient> client_;
  ObjectUrl url_;
  ObjectInfo info_;
};

// Whether the object exists: a HEAD that answers 200 (404: false; any
// other failure is thrown, so that a denied request is not read as "no
// such file").
bool object_exists(const std::string& url);

}  // namespace backplane::detail
