// lanework/version.h — the library's version, at compile time and at run time.
//
// LW_VERSION_MAJOR/MINOR/PATCH are the version of the headers a program was compiled against;
// lw_version() is the version of the library it runs with. They differ only when a program
// runs with another liblanework than it was built with; the SONAME (liblanework.so.MAJOR)
// keeps programs off a library whose MAJOR differs (docs/packaging.md, "ABI").
#ifndef LANEWORK_VERSION_H_
#define LANEWORK_VERSION_H_

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// CMakeLists.txt reads these three lines for project(VERSION): change them only here.
#define LW_VERSION_MAJOR 0
#define LW_VERSION_MINOR 2
#define LW_VERSION_PATCH 0

#define LW_VERSION_STRINGIFY_(x) #x
#define LW_VERSION_STRINGIFY(x) LW_VERSION_STRINGIFY_(x)
// "MAJOR.MINOR.PATCH" of the headers.
#define LW_VERSION_STRING                                                       \
  LW_VERSION_STRINGIFY(LW_VERSION_MAJOR) "." LW_VERSION_STRINGIFY(LW_VERSION_MINOR) "." \
      LW_VERSION_STRINGIFY(LW_VERSION_PATCH)
// One number that orders versions: MAJOR * 10000 + MINOR * 100 + PATCH.
#define LW_VERSION_NUMBER (LW_VERSION_MAJOR * 10000 + LW_VERSION_MINOR * 100 + LW_VERSION_PATCH)

// The running library's "MAJOR.MINOR.PATCH"; a static string, never NULL. Thread-safe.
LW_API const char *lw_version(void);
// The running library's LW_VERSION_NUMBER. Thread-safe.
LW_API int lw_version_number(void);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_VERSION_H_
