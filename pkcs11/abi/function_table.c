#include "keyshare_abi.h"
