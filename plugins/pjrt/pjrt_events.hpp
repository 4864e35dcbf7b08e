// PJRT objects that work in flight may still use, shared between the
// buffers that hold them and the events of that work, and the adapter's
// Event over a PJRT_Event.
//
// Events: wait is PJRT_Event_Await (its error becomes the copy's, naming the
// operation), query is PJRT_Event_IsReady, and the destructor awaits, then
// PJRT_Event_Destroy. PJRT_Event_OnReady is not used: its callback runs on a
// PJRT thread, where releasing what an event keeps alive (a PJRT buffer)
// would call back into PJRT from inside it.
//
// In a forked child nothing here calls PJRT (the client is the parent's):
// destructors only drop the bookkeeping.
#ifndef BACKPLANE_PLUGINS_PJRT_PJRT_EVENTS_HPP
#define BACKPLANE_PLUGINS_PJRT_PJRT_EVENTS_HPP

#include "pjrt_client.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace backplane::pjrt {

// One PJRT_Buffer; PJRT_Buffer_Destroy when the last holder lets go.
class PjrtBuffer {
 public:
  PjrtBuffer(const Client& client, PJRT_Buffer* buffer) : client_(client), buffer_(buffer) {}
  ~PjrtBuffer();
  PjrtBuffer(const PjrtBuffer&) = delete;
  PjrtBuffer& operator=(const PjrtBuffer&) = delete;
  PJRT_Buffer* get() const { return buffer_; }

 private:
  const Client& client_;
  PJRT_Buffer* buffer_;
};

// One PJRT_AsyncHostToDeviceTransferManager of one U8 buffer.
class TransferManager {
 public:
  TransferManager(const Client& client, PJRT_AsyncHostToDeviceTransferManager* manager)
      : client_(client), manager_(manager) {}
  ~TransferManager();
  TransferManager(const TransferManager&) = delete;
  TransferManager& operator=(const TransferManager&) = delete;
  PJRT_AsyncHostToDeviceTransferManager* get() const { return manager_; }

 private:
  const Client& client_;
  PJRT_AsyncHostToDeviceTransferManager* manager_;
};

// What an event completes, for its error; formatted only on failure.
struct Operation {
  const char* call = "";  // the PJRT call
  std::uint64_t size = 0;
  const char* preposition = "";  // "to", "from" or "on"
  const Device* device = nullptr;
  std::string text() const;  // "PJRT_Buffer_CopyRawToHost of 4.00 MiB from pjrt:0"
};

struct Event {
  const Client* client = nullptr;
  PJRT_Event* event = nullptr;
  Operation operation;
  // What the work uses until it completes: PJRT buffers and transfer
  // managers, host staging.
  std::vector<std::shared_ptr<const void>> keep;
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
};

// An Event over `event` (NULL: nullptr, the work completed).
std::unique_ptr<Event> track(const Client& client, PJRT_Event* event, const Operation& operation,
                             std::vector<std::shared_ptr<const void>> keep);

// PJRT_Event_Await; throws sdk::Failure "<operation>: <message> (<CODE>)".
void wait(const Event& event);
// PJRT_Event_IsReady (an error in asking counts as ready: wait reports it).
bool ready(const Event& event);

}  // namespace backplane::pjrt

#endif  // BACKPLANE_PLUGINS_PJRT_PJRT_EVENTS_HPP
