// The vocabulary of the trace file: the categories ("cat"), event names
// ("name") and argument keys that the recorder writes and that
// `backplane trace summary` (tools/trace_reader.cpp) reads. docs/tracing.md
// lists them for users; a name changed here changes both sides at once.
//
// Header-only and free of dependencies, so the tool includes it without
// linking the core's internals.
#pragma once

#include <string_view>

namespace backplane::detail::trace {

namespace category {
inline constexpr std::string_view kDiscovery = "discovery";
inline constexpr std::string_view kAllocation = "allocation";
inline constexpr std::string_view kHostToDevice = "host_to_device";
inline constexpr std::string_view kDeviceToHost = "device_to_host";
inline constexpr std::string_view kDeviceToDevice = "device_to_device";
inline constexpr std::string_view kGather = "gather";
inline constexpr std::string_view kWidening = "widening";
inline constexpr std::string_view kStaging = "staging";
inline constexpr std::string_view kFileRead = "file_read";
inline constexpr std::string_view kError = "error";
inline constexpr std::string_view kBatchStream = "batch_stream";
inline constexpr std::string_view kMemory = "memory";  // counters
inline constexpr std::string_view kTrace = "trace";    // the recorder's own notes
inline constexpr std::string_view kMetadata = "__metadata";
}  // namespace category

namespace event {
// host_to_device, device_to_host, device_to_device: what issued the transfer.
inline constexpr std::string_view kDevicePut = "device_put";
inline constexpr std::string_view kTakeWindows = "take_windows";
inline constexpr std::string_view kBatch = "batch";
inline constexpr std::string_view kBatchDocuments = "batch_documents";  // a batch's document pieces
inline constexpr std::string_view kStreamLoad = "stream_load";
// staging
inline constexpr std::string_view kFill = "fill";
inline constexpr std::string_view kCopy = "copy";
// widening
inline constexpr std::string_view kConvertIntegers = "convert_integers";
// gather (take_windows' gather), and the batch stream's gather
inline constexpr std::string_view kGather = "gather";
// allocation
inline constexpr std::string_view kAllocate = "allocate";
inline constexpr std::string_view kFree = "free";
inline constexpr std::string_view kEmptyCache = "empty_cache";
// file_read
inline constexpr std::string_view kRead = "read";
// batch_stream
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kWait = "wait";
inline constexpr std::string_view kTransfer = "transfer";
// discovery: "discover NAME"
inline constexpr std::string_view kDiscoverPrefix = "discover ";
// trace
inline constexpr std::string_view kDroppedEvents = "dropped events";
// __metadata
inline constexpr std::string_view kProcessName = "process_name";
inline constexpr std::string_view kThreadName = "thread_name";
}  // namespace event

// Keys of "args" (and of "otherData") that a reader of the file relies on.
namespace arg {
inline constexpr std::string_view kBytes = "bytes";
inline constexpr std::string_view kDevice = "device";
inline constexpr std::string_view kTarget = "target";
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kStream = "stream";  // batch_stream events: which stream
inline constexpr std::string_view kDroppedEvents = "dropped_events";
inline constexpr std::string_view kCapacity = "capacity";
}  // namespace arg

}  // namespace backplane::detail::trace
