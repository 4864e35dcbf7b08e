/*
 * BACKPLANE_API marks what libbackplane.so exports: the C API (bp_*) and the
 * public C++ API. Everything else in the library is built with hidden
 * visibility, and a version script keeps even default-visibility template
 * instantiations (of std, fmt, nlohmann::json) local, so a program that links
 * other copies of those libraries never binds to ours.
 */
#ifndef BACKPLANE_API_H
#define BACKPLANE_API_H

#if defined(__GNUC__) || defined(__clang__)
#define BACKPLANE_API __attribute__((visibility("default")))
#else
#define BACKPLANE_API
#endif

#endif /* BACKPLANE_API_H */
