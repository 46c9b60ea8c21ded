#include "common/test_util.h"
