// What a backend class is, as concepts the compiler checks: the types the
// hooks trade in, one concept per hook, `Backend` for the required ones and
// one per optional capability. table<Impl>() (backend.hpp) asserts each
// hook's concept on its own, so a missing hook or a wrong signature is
// reported by name; a plugin may also assert `Backend<MyBackend>` after its
// class. See docs/plugin-authors.md for a worked example.
//
// Signatures are matched exactly (a hook may be const or noexcept, or
// inherited), not by whether a call would compile: a size taken as
// std::uint32_t would truncate silently, and an optional hook with a typo in
// its parameters would otherwise never be called.
#ifndef BACKPLANE_PLUGIN_SDK_CONTRACT_HPP
#define BACKPLANE_PLUGIN_SDK_CONTRACT_HPP

#include <backplane/plugin.h>
#include <backplane/plugin_sdk/checks.hpp>
#include <backplane/plugin_sdk/timing.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::plugin_sdk {

struct Identity {
  std::string_view name;     // [a-z0-9_]+, the <name> of backplane-<name>.so
  std::string_view version;  // free-form
  std::int32_t priority = 0;
  BP_Capabilities capabilities = 0;
  std::int32_t dlpack_device_type = 0;  // DLDeviceType, 0 when not shared through DLPack
};

struct Probe {
  bool available = false;
  std::string reason;                    // why not, or a short description
  std::optional<std::int32_t> priority;  // from what was found; else kIdentity's
};

struct DeviceDescription {
  std::string name;
  BP_DeviceKind kind = BP_DEVICE_KIND_CPU;
  std::vector<std::pair<std::string, std::string>> attributes;
};

struct MemoryFigures {
  std::uint64_t total = 0;
  // Empty when the backend cannot tell (BP_MEMORY_FREE_UNKNOWN): never an estimate.
  std::optional<std::uint64_t> free;
};

// What the SDK needs of every buffer; a backend's Buffer adds its own fields.
struct BufferBase {
  std::int32_t ordinal = 0;
  BP_MemoryKind kind = BP_MEMORY_DEVICE;
  std::uint64_t size = 0;
  void* address = nullptr;  // memory_allocate's `address` out-field
};

enum class Mode { kBlocking, kAsync };

namespace detail {

// Accepts &C::hook when the hook has exactly the signature R(A...), const or
// not; noexcept and inherited hooks convert implicitly.
template <class C, class Signature>
struct Hook;
template <class C, class R, class... A>
struct Hook<C, R(A...)> {
  static void match(R (C::*)(A...));
  static void match(R (C::*)(A...) const);
  static void match_static(R (*)(A...));
};

template <class Impl>
using BufferPtr = std::unique_ptr<typename Impl::Buffer>;
template <class Impl>
using EventPtr = std::unique_ptr<typename Impl::Event>;

}  // namespace detail

// ---- the types a backend class declares ----

template <class Impl>
concept HasIdentity = requires {
  { Impl::kIdentity } -> std::convertible_to<Identity>;
};

template <class Impl>
concept HasBuffer = requires {
  typename Impl::Buffer;
}
&&std::derived_from<typename Impl::Buffer, BufferBase>;

template <class Impl>
concept HasEvent = requires {
  typename Impl::Event;
}
&&std::destructible<typename Impl::Event>;

// ---- required hooks ----

template <class Impl>
concept HasCreate = requires {
  detail::Hook<Impl, std::unique_ptr<Impl>(const Options&)>::match_static(&Impl::create);
};

template <class Impl>
concept HasProbe = requires {
  detail::Hook<Impl, Probe()>::match(&Impl::probe);
};

template <class Impl>
concept HasDeviceCount = requires {
  detail::Hook<Impl, std::int32_t()>::match(&Impl::device_count);
};

template <class Impl>
concept HasDescribe = requires {
  detail::Hook<Impl, DeviceDescription(std::int32_t)>::match(&Impl::describe);
};

template <class Impl>
concept HasMemory = requires {
  detail::Hook<Impl, MemoryFigures(std::int32_t)>::match(&Impl::memory);
};

template <class Impl>
concept HasAllocate = requires {
  detail::Hook<Impl, detail::BufferPtr<Impl>(std::int32_t, BP_MemoryKind, std::uint64_t)>::match(&Impl::allocate);
};

template <class Impl>
concept HasCopyToDevice = requires {
  detail::Hook<Impl, detail::EventPtr<Impl>(typename Impl::Buffer&, std::uint64_t, const void*, std::uint64_t,
                                            Mode)>::match(&Impl::copy_to_device);
};

template <class Impl>
concept HasCopyToHost = requires {
  detail::Hook<Impl, detail::EventPtr<Impl>(typename Impl::Buffer&, std::uint64_t, void*, std::uint64_t, Mode)>::match(
      &Impl::copy_to_host);
};

template <class Impl>
concept HasCopyDeviceToDevice = requires {
  detail::Hook<Impl, detail::EventPtr<Impl>(typename Impl::Buffer&, std::uint64_t, typename Impl::Buffer&,
                                            std::uint64_t, std::uint64_t, Mode)>::match(&Impl::copy_device_to_device);
};

template <class Impl>
concept HasWait = requires {
  detail::Hook<Impl, void(typename Impl::Event&)>::match(&Impl::wait);
};

template <class Impl>
concept HasQuery = requires {
  detail::Hook<Impl, bool(typename Impl::Event&)>::match(&Impl::query);
};

// Every hook the table needs. BP_CAPABILITY_ASYNC adds none: the copy hooks
// take the Mode, and may return an event in either.
template <class Impl>
concept Backend = HasIdentity<Impl> && HasBuffer<Impl> && HasEvent<Impl> && HasCreate<Impl> && HasProbe<Impl> &&
    HasDeviceCount<Impl> && HasDescribe<Impl> && HasMemory<Impl> && HasAllocate<Impl> && HasCopyToDevice<Impl> &&
    HasCopyToHost<Impl> && HasCopyDeviceToDevice<Impl> && HasWait<Impl> && HasQuery<Impl>;

// ---- optional hooks: a capability bit each, or none ----

// BP_CAPABILITY_WRAP_MEMORY.
template <class Impl>
concept WrapsMemory = requires {
  detail::Hook<Impl, detail::BufferPtr<Impl>(std::int32_t, void*, std::uint64_t)>::match(&Impl::wrap);
};

// BP_CAPABILITY_CONVERT_INTEGERS.
template <class Impl>
concept ConvertsIntegers = requires {
  detail::Hook<Impl,
               detail::EventPtr<Impl>(typename Impl::Buffer&, std::uint64_t, BP_IntegerType, typename Impl::Buffer&,
                                      std::uint64_t, BP_IntegerType, std::uint64_t)>::match(&Impl::convert_integers);
};

// BP_CAPABILITY_EVENT_TIMING.
template <class Impl>
concept TimesEvents = requires {
  detail::Hook<Impl, std::optional<DeviceSpan>(typename Impl::Event&)>::match(&Impl::timing);
};

// No capability bit: refusing a process (a forked child), and freeing with a
// reported failure.
template <class Impl>
concept Refuses = requires {
  detail::Hook<Impl, std::string_view()>::match(&Impl::refusal);
};

template <class Impl>
concept Releases = requires {
  detail::Hook<Impl, void(typename Impl::Buffer&)>::match(&Impl::release);
};

// ABI 1.4, no capability bit: a backend whose capabilities and DLPack device
// type depend on what its probe found (the pjrt adapter over a CPU or a GPU
// platform). Both are asked once, right after probe, and the SDK's own
// checks follow the answers; without them kIdentity's apply.
template <class Impl>
concept StatesCapabilities = requires {
  detail::Hook<Impl, BP_Capabilities()>::match(&Impl::capabilities);
  detail::Hook<Impl, std::int32_t()>::match(&Impl::dlpack_device_type);
};

// ABI 1.4, no capability bit: a device's memories, the default first, as
// (kind, description) pairs: "device", "pinned_host", "unpinned_host", or
// "host" for ordinary host memory. Asked once per device, with describe.
// Without it the core derives the list from the capabilities.
using MemoryList = std::vector<std::pair<std::string, std::string>>;
template <class Impl>
concept DescribesMemories = requires {
  detail::Hook<Impl, MemoryList(std::int32_t)>::match(&Impl::memories);
};

namespace detail {

// Whether Impl has a member of this name at all: an optional hook that is
// named but does not match its concept is a mistake, not an absence.
template <class Impl>
concept NamesWrap = requires {
  &Impl::wrap;
};
template <class Impl>
concept NamesConvertIntegers = requires {
  &Impl::convert_integers;
};
template <class Impl>
concept NamesTiming = requires {
  &Impl::timing;
};
template <class Impl>
concept NamesRefusal = requires {
  &Impl::refusal;
};
template <class Impl>
concept NamesRelease = requires {
  &Impl::release;
};
template <class Impl>
concept NamesCapabilities = requires {
  &Impl::capabilities;
}
|| requires { &Impl::dlpack_device_type; };
template <class Impl>
concept NamesMemories = requires {
  &Impl::memories;
};

template <class Impl>
constexpr bool declares(BP_Capabilities capability) {
  if constexpr (HasIdentity<Impl>) {
    return (Identity(Impl::kIdentity).capabilities & capability) != 0;
  } else {
    return false;
  }
}

// One assertion per hook, each naming the hook and its signature. True when
// the class is a complete backend, so that the caller generates nothing
// (and reports nothing more) for one that is not.
template <class Impl>
consteval bool check_contract() {
  static_assert(HasIdentity<Impl>, "backend class: missing `static constexpr plugin_sdk::Identity kIdentity`");
  static_assert(HasBuffer<Impl>, "backend class: missing `struct Buffer : plugin_sdk::BufferBase`");
  static_assert(HasEvent<Impl>, "backend class: missing `struct Event` (destructible)");
  static_assert(HasCreate<Impl>,
                "backend hook create: missing or wrong signature; expected "
                "`static std::unique_ptr<Impl> create(const plugin_sdk::Options& options)`");
  static_assert(HasProbe<Impl>, "backend hook probe: missing or wrong signature; expected `plugin_sdk::Probe probe()`");
  static_assert(HasDeviceCount<Impl>,
                "backend hook device_count: missing or wrong signature; expected `std::int32_t device_count()`");
  static_assert(HasDescribe<Impl>,
                "backend hook describe: missing or wrong signature; expected "
                "`plugin_sdk::DeviceDescription describe(std::int32_t ordinal)`");
  static_assert(HasMemory<Impl>,
                "backend hook memory: missing or wrong signature; expected "
                "`plugin_sdk::MemoryFigures memory(std::int32_t ordinal)`");
  static_assert(HasAllocate<Impl>,
                "backend hook allocate: missing or wrong signature; expected "
                "`std::unique_ptr<Buffer> allocate(std::int32_t ordinal, BP_MemoryKind kind, std::uint64_t size)`");
  static_assert(HasCopyToDevice<Impl>,
                "backend hook copy_to_device: missing or wrong signature; expected "
                "`std::unique_ptr<Event> copy_to_device(Buffer& destination, std::uint64_t offset, const void* "
                "source, std::uint64_t size, plugin_sdk::Mode mode)`");
  static_assert(HasCopyToHost<Impl>,
                "backend hook copy_to_host: missing or wrong signature; expected "
                "`std::unique_ptr<Event> copy_to_host(Buffer& source, std::uint64_t offset, void* destination, "
                "std::uint64_t size, plugin_sdk::Mode mode)`");
  static_assert(HasCopyDeviceToDevice<Impl>,
                "backend hook copy_device_to_device: missing or wrong signature; expected "
                "`std::unique_ptr<Event> copy_device_to_device(Buffer& source, std::uint64_t source_offset, Buffer& "
                "destination, std::uint64_t destination_offset, std::uint64_t size, plugin_sdk::Mode mode)`");
  static_assert(HasWait<Impl>, "backend hook wait: missing or wrong signature; expected `void wait(Event& event)`");
  static_assert(HasQuery<Impl>, "backend hook query: missing or wrong signature; expected `bool query(Event& event)`");

  static_assert(WrapsMemory<Impl> || !NamesWrap<Impl>,
                "backend hook wrap: wrong signature; expected "
                "`std::unique_ptr<Buffer> wrap(std::int32_t ordinal, void* address, std::uint64_t size)`");
  static_assert(ConvertsIntegers<Impl> || !NamesConvertIntegers<Impl>,
                "backend hook convert_integers: wrong signature; expected `std::unique_ptr<Event> "
                "convert_integers(Buffer& source, std::uint64_t source_offset, BP_IntegerType source_type, Buffer& "
                "destination, std::uint64_t destination_offset, BP_IntegerType destination_type, std::uint64_t "
                "count)`");
  static_assert(TimesEvents<Impl> || !NamesTiming<Impl>,
                "backend hook timing: wrong signature; expected "
                "`std::optional<plugin_sdk::DeviceSpan> timing(Event& event)`");
  static_assert(Refuses<Impl> || !NamesRefusal<Impl>,
                "backend hook refusal: wrong signature; expected `std::string_view refusal()`");
  static_assert(Releases<Impl> || !NamesRelease<Impl>,
                "backend hook release: wrong signature; expected `void release(Buffer& buffer)`");
  static_assert(StatesCapabilities<Impl> || !NamesCapabilities<Impl>,
                "backend hooks capabilities and dlpack_device_type: both or neither, with signatures "
                "`BP_Capabilities capabilities()` and `std::int32_t dlpack_device_type()`");
  static_assert(DescribesMemories<Impl> || !NamesMemories<Impl>,
                "backend hook memories: wrong signature; expected "
                "`plugin_sdk::MemoryList memories(std::int32_t ordinal)`");

  static_assert(declares<Impl>(BP_CAPABILITY_WRAP_MEMORY) == NamesWrap<Impl>,
                "backend hook wrap: BP_CAPABILITY_WRAP_MEMORY is declared exactly when the class has wrap()");
  static_assert(declares<Impl>(BP_CAPABILITY_CONVERT_INTEGERS) == NamesConvertIntegers<Impl>,
                "backend hook convert_integers: BP_CAPABILITY_CONVERT_INTEGERS is declared exactly when the class "
                "has convert_integers()");
  static_assert(declares<Impl>(BP_CAPABILITY_EVENT_TIMING) == NamesTiming<Impl>,
                "backend hook timing: BP_CAPABILITY_EVENT_TIMING is declared exactly when the class has timing()");
  return Backend<Impl> &&
         (StatesCapabilities<Impl> || !NamesCapabilities<Impl>)&&(DescribesMemories<Impl> || !NamesMemories<Impl>)&&(
             WrapsMemory<Impl> ||
             !NamesWrap<
                 Impl>)&&(ConvertsIntegers<Impl> ||
                          !NamesConvertIntegers<
                              Impl>)&&(TimesEvents<Impl> ||
                                       !NamesTiming<
                                           Impl>)&&(Refuses<Impl> ||
                                                    !NamesRefusal<
                                                        Impl>)&&(Releases<Impl> ||
                                                                 !NamesRelease<
                                                                     Impl>)&&declares<Impl>(BP_CAPABILITY_WRAP_MEMORY) ==
             NamesWrap<Impl> &&
         declares<Impl>(BP_CAPABILITY_CONVERT_INTEGERS) == NamesConvertIntegers<Impl> &&
         declares<Impl>(BP_CAPABILITY_EVENT_TIMING) == NamesTiming<Impl>;
}

}  // namespace detail

}  // namespace backplane::plugin_sdk

#endif  // BACKPLANE_PLUGIN_SDK_CONTRACT_HPP
