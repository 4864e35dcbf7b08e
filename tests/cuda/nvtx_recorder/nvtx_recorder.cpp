// An NVTX injection library for the tests: what a tool such as Nsight Systems
// loads through NVTX_INJECTION64_PATH, reduced to counting. It installs its
// own handlers for the domain calls of NVTX's core module and, at exit, writes
// one line per (domain, call, name) with its count to the file named by
// BP_NVTX_RECORD:
//   backplane<TAB>start<TAB>device_put<TAB>3
// Calls are "start", "end", "push" and "pop"; an end or pop names the range it
// closes, and one with no open range is counted under the name "?".
// Only the types: a tool implements the calls.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct Domain {
  std::string name;
};

struct State {
  std::mutex mutex;
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> counts;
  std::map<std::uint64_t, std::pair<std::string, std::string>> open;  // range id -> (domain, name)
  std::uint64_t next_id = 1;
  std::vector<Domain*> domains;
};

// Leaked: ranges may end while static destructors run.
State& state() {
  static State* instance = new State();
  return *instance;
}

thread_local std::map<std::string, std::vector<std::string>> t_pushed;  // domain -> names

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain == nullptr ? std::string("(default)") : reinterpret_cast<Domain*>(domain)->name;
}

std::string message(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr || attributes->messageType != NVTX_MESSAGE_TYPE_ASCII ||
      attributes->message.ascii == nullptr) {
    return "(no ascii message)";
  }
  return attributes->message.ascii;
}

void count_locked(const std::string& domain, const char* call, const std::string& name) {
  state().counts[{domain, call, name}] += 1;
}

nvtxDomainHandle_t domain_create(const char* name) {
  const std::lock_guard lock(state().mutex);
  auto* domain = new Domain{name != nullptr ? name : ""};
  state().domains.push_back(domain);
  count_locked(domain->name, "create", domain->name);
  return reinterpret_cast<nvtxDomainHandle_t>(domain);
}

nvtxRangeId_t range_start(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  const std::lock_guard lock(state().mutex);
  const std::uint64_t id = state().next_id++;
  state().open[id] = {domain_name(domain), message(attributes)};
  count_locked(domain_name(domain), "start", message(attributes));
  return id;
}

void range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  const std::lock_guard lock(state().mutex);
  const auto found = state().open.find(id);
  if (found == state().open.end() || found->second.first != domain_name(domain)) {
    count_locked(domain_name(domain), "end", "?");
    return;
  }
  count_locked(found->second.first, "end", found->second.second);
  state().open.erase(found);
}

int range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::vector<std::string>& stack = t_pushed[domain_name(domain)];
  stack.push_back(message(attributes));
  const std::lock_guard lock(state().mutex);
  count_locked(domain_name(domain), "push", stack.back());
  return static_cast<int>(stack.size()) - 1;
}

int range_pop(nvtxDomainHandle_t domain) {
  std::vector<std::string>& stack = t_pushed[domain_name(domain)];
  const std::lock_guard lock(state().mutex);
  if (stack.empty()) {
    count_locked(domain_name(domain), "pop", "?");
    return -1;
  }
  count_locked(domain_name(domain), "pop", stack.back());
  stack.pop_back();
  return static_cast<int>(stack.size());
}

void write_record() {
  const char* path = std::getenv("BP_NVTX_RECORD");
  if (path == nullptr || *path == '\0') return;
  std::FILE* file = std::fopen(path, "w");
  if (file == nullptr) {
    std::fprintf(stderr, "nvtx_recorder: cannot write %s\n", path);
    return;
  }
  const std::lock_guard lock(state().mutex);
  for (const auto& [key, count] : state().counts) {
    const auto& [domain, call, name] = key;
    std::fprintf(file, "%s\t%s\t%s\t%llu\n", domain.c_str(), call.c_str(), name.c_str(),
                 static_cast<unsigned long long>(count));
  }
  std::fclose(file);
}

template <typename Function>
void install(NvtxFunctionTable table, unsigned int size, unsigned int id, Function function) {
  if (id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) == 0 || table == nullptr) return 0;
  install(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &range_start);
  install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &range_end);
  install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  install(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  std::atexit(write_record);
  return 1;
}
