/* The one export macro. The library is built with -fvisibility=hidden and CT_BUILDING_LIBRARY;
 * only declarations marked CT_API are exported. */
#ifndef CLTENSOR_EXPORT_H
#define CLTENSOR_EXPORT_H

#if defined(CT_BUILDING_LIBRARY) && defined(__GNUC__)
#define CT_API __attribute__((visibility("default")))
#else
#define CT_API
#endif

/* Marks a deprecated alias (include/cltensor/deprecated.h): a use warns where the compiler knows
 * the attribute. Silent in the library's own build, which defines the aliases and wraps them
 * (api_wrappers.c) under -Werror. */
#if defined(__GNUC__) && !defined(CT_BUILDING_LIBRARY)
#define CT_DEPRECATED __attribute__((deprecated))
#else
#define CT_DEPRECATED
#endif

#ifdef __cplusplus
#define CT_BEGIN_DECLS extern "C" {
#define CT_END_DECLS }
#else
#define CT_BEGIN_DECLS
#define CT_END_DECLS
#endif

#endif
