// The bodies of the fuzz targets, shared by the libFuzzer executables
// (fuzz_<target>.cpp) and the regression replay in the normal test suite
// (tests/reliability/test_fuzz_regressions.cpp), so that a crash file found by
// a campaign reproduces under gcc without libFuzzer.
//
// Contract of every target: it returns normally for any input. Rejections the
// API documents (backplane::Error and subclasses) are caught inside and count
// as a normal return. Anything else escaping (std::logic_error for a broken
// invariant, bad_alloc from an allocation based on a claimed size), and any
// sanitizer report, is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace backplane::fuzz {

using Bytes = std::span<const std::uint8_t>;

// parse_header over the bytes as a whole file; an accepted header is checked
// against its own invariants and round-tripped through plan_file.
void safetensors_header(Bytes data);
// parse_config over the bytes as the text of a config file.
void config(Bytes data);
// parse_selector; an accepted selector is canonical and round-trips.
void selector(Bytes data);
// validate_table on a table built from the bytes, with every pointer aimed at
// a real buffer (or NULL) and every function pointer NULL or a trap.
void plugin_table(Bytes data);
// BatchStreamState::from_json; an accepted state round-trips through
// to_json to the same state.
void batch_stream_state(Bytes data);
// describe_token_file over the bytes as a whole file (named .bin and
// .safetensors, with and without a dtype), and as the start of a larger file
// whose size the last 8 bytes give: an accepted layout lies inside the file
// and reads the same from the header bytes the loader reads.
void token_headers(Bytes data);
// scan_json_number (serde_json's number parser) at the start of the bytes: it
// accepts exactly the JSON numbers not past the top of the double range,
// ends where JSON's grammar ends them, reads u64s exactly and agrees with
// strtod to within a few ulps.
void json_number(Bytes data);
// read_trace_summary (`backplane trace summary`'s streaming reader) over the
// bytes as a whole trace file: an accepted summary holds only the reported
// categories, at most kMaxTraceGroups devices and streams, and counts no
// more events than the input has bytes.
void trace_summary(Bytes data);
// parse_listing and parse_error (an S3 server's ListObjectsV2 page and error
// body) over the bytes: a page is read or refused with kIo, never anything
// else; a truncated page has a token; an error's message is cut to 300 bytes.
void s3_listing(Bytes data);

struct Target {
  std::string_view name;  // as in fuzz_<name> and tests/fuzz/seeds/<name>/
  void (*run)(Bytes data);
};
inline constexpr Target kTargets[] = {
    {"safetensors_header", safetensors_header},
    {"config", config},
    {"selector", selector},
    {"plugin_table", plugin_table},
    {"batch_stream_state", batch_stream_state},
    {"token_headers", token_headers},
    {"json_number", json_number},
    {"trace_summary", trace_summary},
    {"s3_listing", s3_listing},
};

}  // namespace backplane::fuzz
