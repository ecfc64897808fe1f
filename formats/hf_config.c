#include "formats/formats_internal.h"
