/* Symbol visibility: the library is built with -fvisibility=hidden; only TRIB_API symbols are exported. */
#ifndef TRIBUTARY_EXPORT_H_
#define TRIBUTARY_EXPORT_H_
#if defined(_WIN32)
#define TRIB_API __declspec(dllexport)
#else
#define TRIB_API __attribute__((visibility("default")))
#endif
#endif
