// The plugin SDK: write a backend as a C++ class with hook methods and get
// the whole Backend ABI (plugin.h) generated around it. Header-only; the ABI
// itself is unchanged, and a plugin in plain C needs only plugin.h.
//
//   backplane/plugin_sdk/contract.hpp what a backend class provides, as concepts
//   backplane/plugin_sdk/backend.hpp  the table generator
//   backplane/plugin_sdk/checks.hpp   ranges, options, byte sizes in messages
//   backplane/plugin_sdk/devices.hpp  a backend's devices, started on first use
//   backplane/plugin_sdk/handles.hpp  lock-free handle tables
//   backplane/plugin_sdk/fork.hpp     refusing a forked child of a driver's process
//   backplane/plugin_sdk/host_memory.hpp  host memory as this process can use it
//                                     (RLIMIT_AS and cgroup limits); included
//                                     by the plugins that serve host memory
//   backplane/plugin_sdk/typed_value.hpp  the <type>:<value> grammar of typed
//                                     option values (PJRT create options)
#ifndef BACKPLANE_PLUGIN_SDK_HPP
#define BACKPLANE_PLUGIN_SDK_HPP

#include <backplane/plugin_sdk/backend.hpp>
#include <backplane/plugin_sdk/checks.hpp>
#include <backplane/plugin_sdk/contract.hpp>
#include <backplane/plugin_sdk/devices.hpp>
#include <backplane/plugin_sdk/fork.hpp>
#include <backplane/plugin_sdk/handles.hpp>

#endif  // BACKPLANE_PLUGIN_SDK_HPP
