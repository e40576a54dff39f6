#include <png.h>

// Macros Swift does not import (they are built from other macros).
static const unsigned int cpng_format_rgb = PNG_FORMAT_RGB;
static const unsigned int cpng_image_version = PNG_IMAGE_VERSION;
