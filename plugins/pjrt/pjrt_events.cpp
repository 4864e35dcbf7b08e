// Shared PJRT objects and events (pjrt_events.hpp).
#include "pjrt_events.hpp"

#include <cstdio>

namespace backplane::pjrt {
namespace {

// A void call's error has nowhere to go but the log.
void report(const Library& library, PJRT_Error* error, const char* call) {
  if (const auto failure = library.take(error)) {
    std::fprintf(stderr, "backplane pjrt: %s failed: %s (%s)\n", call, failure->message.c_str(),
                 code_name(failure->code).c_str());
  }
}

}  // namespace

PjrtBuffer::~PjrtBuffer() {
  if (buffer_ == nullptr || client_.forked()) return;
  PJRT_Buffer_Destroy_Args args{};
  args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  args.buffer = buffer_;
  report(client_.library(), client_.library().api().PJRT_Buffer_Destroy(&args), "PJRT_Buffer_Destroy");
}

TransferManager::~TransferManager() {
  if (manager_ == nullptr || client_.forked()) return;
  PJRT_AsyncHostToDeviceTransferManager_Destroy_Args args{};
  args.struct_size = PJRT_AsyncHostToDeviceTransferManager_Destroy_Args_STRUCT_SIZE;
  args.transfer_manager = manager_;
  report(client_.library(), client_.library().api().PJRT_AsyncHostToDeviceTransferManager_Destroy(&args),
         "PJRT_AsyncHostToDeviceTransferManager_Destroy");
}

std::string Operation::text() const {
  return std::string(call) + " of " + sdk::format_bytes(size) + " " + preposition + " " +
         (device != nullptr ? device->label : std::string("pjrt"));
}

Event::~Event() {
  if (event == nullptr || client->forked()) return;
  const Library& library = client->library();
  PJRT_Event_Await_Args await{};
  await.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  await.event = event;
  library.take(library.api().PJRT_Event_Await(&await));  // an error was the waiter's to read
  PJRT_Event_Destroy_Args destroy{};
  destroy.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  destroy.event = event;
  report(library, library.api().PJRT_Event_Destroy(&destroy), "PJRT_Event_Destroy");
}

std::unique_ptr<Event> track(const Client& client, PJRT_Event* event, const Operation& operation,
                             std::vector<std::shared_ptr<const void>> keep) {
  if (event == nullptr) return nullptr;
  auto tracked = std::make_unique<Event>();
  tracked->client = &client;
  tracked->event = event;
  tracked->operation = operation;
  tracked->keep = std::move(keep);
  return tracked;
}

void wait(const Event& event) {
  const Library& library = event.client->library();
  PJRT_Event_Await_Args args{};
  args.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  args.event = event.event;
  library.check(library.api().PJRT_Event_Await(&args), [&] { return event.operation.text(); });
}

bool ready(const Event& event) {
  const Library& library = event.client->library();
  PJRT_Event_IsReady_Args args{};
  args.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  args.event = event.event;
  if (library.take(library.api().PJRT_Event_IsReady(&args))) return true;
  return args.is_ready;
}

}  // namespace backplane::pjrt
