// The libfuse low-level API at the version clfmount is written against.
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse_lowlevel.h>
