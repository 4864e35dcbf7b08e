// bp_tokens_*, bp_token_files_*: token files as zero-copy arrays.
#include "c_api/c_api_support.hpp"

#include <backplane/tokens.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct bp_token_files {
  backplane::c_api::NamedArrays files;  // bytewise path order
  // Beside each file: its document starts, where its format records them.
  std::vector<std::optional<std::vector<std::int64_t>>> document_starts;
};

namespace backplane::c_api {
namespace {

LiveHandles<bp_token_files>& live_token_files = make_live_handles<bp_token_files>();

std::shared_ptr<const bp_token_files> token_files_of(const bp_token_files* files, const char* function) {
  auto live = live_token_files.acquire(files);
  if (!live) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: files is NULL or destroyed", function));
  return live;
}

const NamedArrays::value_type& file_at(const bp_token_files& files, size_t index, const char* function) {
  return entry_at(files.files, index, function, "files");
}

// The size of the struct as API 0.5 defined it, which callers built then
// still pass; any other size must hold the whole struct of today.
constexpr std::size_t kOptionsSize_0_5 = BP_STRUCT_SIZE(bp_tokens_options, device);

TokenFileOptions options_of(Runtime& runtime, const bp_tokens_options* options, const char* function) {
  TokenFileOptions cxx;
  if (options == nullptr) return cxx;
  if (options->struct_size != kOptionsSize_0_5) {
    require_struct_size(options->struct_size, sizeof(bp_tokens_options), function, "options");
    cxx.allow_empty_match = options->allow_empty_match != 0;
  }
  if (options->dtype != 0) cxx.dtype = dtype_of(options->dtype, function);
  if (options->name != nullptr) cxx.name = options->name;
  // NULL is the runtime's cpu device, which load_tokens picks itself.
  if (options->device != nullptr) cxx.device = device_or_default(runtime, options->device);
  return cxx;
}

}  // namespace
}  // namespace backplane::c_api

// The C functions below have C linkage and global scope; they call the
// C++ API and the C API's helpers by their short names.
using namespace ::backplane;
using namespace ::backplane::c_api;

extern "C" {

bp_status bp_tokens_load(bp_runtime* runtime, const char* path, const bp_tokens_options* options, bp_array** out) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_tokens_load");
    require_non_null(path, "bp_tokens_load", "path");
    require_non_null(out, "bp_tokens_load", "out");
    const TokenFileOptions cxx_options = options_of(*runtime_lease, options, "bp_tokens_load");
    *out = new_array_handle(load_tokens(*runtime_lease, path, cxx_options));
  });
}

bp_status bp_tokens_load_files(bp_runtime* runtime, const char* pattern, const bp_tokens_options* options,
                               bp_token_files** out) {
  return guarded([&] {
    const auto runtime_lease = runtime_of(runtime, "bp_tokens_load_files");
    require_non_null(pattern, "bp_tokens_load_files", "pattern");
    require_non_null(out, "bp_tokens_load_files", "out");
    const TokenFileOptions cxx_options = options_of(*runtime_lease, options, "bp_tokens_load_files");
    auto files = std::make_shared<bp_token_files>();
    for (TokenFileEntry& entry : load_token_file_entries(*runtime_lease, pattern, cxx_options)) {
      files->files.emplace_back(std::move(entry.path), std::move(entry.tokens));
      files->document_starts.push_back(std::move(entry.document_starts));
    }
    *out = live_token_files.add(std::move(files));
  });
}

void bp_token_files_destroy(bp_token_files* files) {
  live_token_files.remove(files);  // NULL or destroyed twice: nothing
}

bp_status bp_token_files_count(const bp_token_files* files, size_t* out) {
  return guarded([&] {
    const auto live = token_files_of(files, "bp_token_files_count");
    require_non_null(out, "bp_token_files_count", "out");
    *out = live->files.size();
  });
}

bp_status bp_token_files_path(const bp_token_files* files, size_t index, const char** out) {
  return guarded([&] {
    const auto live = token_files_of(files, "bp_token_files_path");
    require_non_null(out, "bp_token_files_path", "out");
    *out = file_at(*live, index, "bp_token_files_path").first.c_str();
  });
}

bp_status bp_token_files_get(const bp_token_files* files, size_t index, bp_array** out) {
  return guarded([&] {
    const auto live = token_files_of(files, "bp_token_files_get");
    require_non_null(out, "bp_token_files_get", "out");
    *out = new_array_handle(file_at(*live, index, "bp_token_files_get").second);
  });
}

bp_status bp_token_files_document_starts(const bp_token_files* files, size_t index, const int64_t** starts,
                                         size_t* count) {
  return guarded([&] {
    const auto live = token_files_of(files, "bp_token_files_document_starts");
    require_non_null(starts, "bp_token_files_document_starts", "starts");
    require_non_null(count, "bp_token_files_document_starts", "count");
    const std::string& path = file_at(*live, index, "bp_token_files_document_starts").first;
    const std::optional<std::vector<std::int64_t>>& found = live->document_starts[index];
    if (!found) {
      throw Error(ErrorCode::kNotFound,
                  fmt::format("bp_token_files_document_starts: {}: its format records no documents (a Megatron-Core "
                              "indexed dataset does; in other files a stream finds them by BOS or EOS tokens)",
                              path));
    }
    *starts = found->data();
    *count = found->size();
  });
}

}  // extern "C"
