// NVTX ranges for the trace's spans (trace.hpp, NVTX). Built with the
// toolkit's header-only nvtx3 where BACKPLANE_NVTX is defined; without it
// every call here is a no-op and no tool is ever attached.
//
// nvtx3 links nothing: its first call reads NVTX_INJECTION64_PATH and loads
// that library (a tool's, such as Nsight Systems') if set; with no tool, its
// calls return at once. attach_tools() makes that first call and keeps the
// answer, so that the hooks build range names only for a tool that listens.
#include "trace/trace.hpp"

#include <mutex>

#ifdef BACKPLANE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace backplane::detail::trace {

namespace {

std::atomic<bool> g_attached{false};

#ifdef BACKPLANE_NVTX
// Set once by attach_tools() before g_attached, then only read.
nvtxDomainHandle_t g_domain = nullptr;

nvtxEventAttributes_t attributes(const std::string& name, std::uint64_t bytes) noexcept {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name.c_str();
  if (bytes != 0) {
    attributes.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    attributes.payload.ullValue = bytes;
  }
  return attributes;
}
#endif

}  // namespace

void attach_tools() noexcept {
#ifdef BACKPLANE_NVTX
  static std::once_flag once;
  try {
    std::call_once(once, [] {
      // With no tool this returns null, the answer of NVTX's no-op table;
      // a tool hands back its handle.
      g_domain = nvtxDomainCreateA("backplane");
      if (g_domain == nullptr) return;
      g_attached.store(true, std::memory_order_seq_cst);
      g_enabled.store(true, std::memory_order_seq_cst);
    });
  } catch (...) {  // call_once failed to start a thread-safe call: no tool
  }
#endif
}

bool tools_attached() noexcept { return g_attached.load(std::memory_order_relaxed); }

#ifdef BACKPLANE_NVTX
std::uint64_t nvtx_start(const std::string& name, std::uint64_t bytes) noexcept {
  if (!tools_attached()) return 0;
  const nvtxEventAttributes_t event = attributes(name, bytes);
  const nvtxRangeId_t id = nvtxDomainRangeStartEx(g_domain, &event);
  return id;
}

void nvtx_end(std::uint64_t id) noexcept {
  if (tools_attached() && id != 0) nvtxDomainRangeEnd(g_domain, id);
}

void nvtx_push(const std::string& name) noexcept {
  if (!tools_attached()) return;
  const nvtxEventAttributes_t event = attributes(name, 0);
  nvtxDomainRangePushEx(g_domain, &event);
}

void nvtx_pop() noexcept {
  if (tools_attached()) nvtxDomainRangePop(g_domain);
}
#else
std::uint64_t nvtx_start(const std::string&, std::uint64_t) noexcept { return 0; }
void nvtx_end(std::uint64_t) noexcept {}
void nvtx_push(const std::string&) noexcept {}
void nvtx_pop() noexcept {}
#endif

}  // namespace backplane::detail::trace
