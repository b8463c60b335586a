/* The one export macro. The library is built with -fvisibility=hidden and CT_BUILDING_LIBRARY;
 * only declarations marked CT_API are exported. */
#ifndef CLTENSOR_EXPORT_H
#define CLTENSOR_EXPORT_H

#if defined(CT_BUILDING_LIBRARY) && defined(__GNUC__)
#define CT_API __attribute__((visibility("default")))
#else
#define CT_API
#endif

#ifdef __cplusplus
#define CT_BEGIN_DECLS extern "C" {
#define CT_END_DECLS }
#else
#define CT_BEGIN_DECLS
#define CT_END_DECLS
#endif

#endif
