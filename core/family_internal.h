/* core/family_internal.h - registering a family row at run time. Not public. */
#ifndef SQZ_CORE_FAMILY_INTERNAL_H
#define SQZ_CORE_FAMILY_INTERNAL_H

#include "sqz/family.h"

/* Adds row to the family table under the first free id from SQZ_FAMILY_COUNT on, writes that
 * id into row->family and *out. The row (static storage) stays the caller's. For tests, which
 * define a family through the table (the runtime's sqz__family_ops_register calls it); call it
 * before any model of that family exists, from one thread: the table is not locked.
 * Returns SQZ_OK, or SQZ_ERR_UNSUPPORTED when every slot is taken. */
sqz_status sqz__family_register(sqz_family_info *row, sqz_family *out);

#endif
