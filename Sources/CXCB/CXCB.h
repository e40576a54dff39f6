// libxcb and the X extensions broadcastd's X11 capture uses (Debian: libxcb*-dev).
#include <xcb/xcb.h>
#include <xcb/shm.h>
#include <xcb/xfixes.h>
#include <xcb/randr.h>
#include <xcb/damage.h>
#include <xcb/composite.h>

// The extension ids are mutable C globals, which Swift 6 will not touch; these hand out their addresses.
static inline xcb_extension_t *cxcb_shm_extension(void) { return &xcb_shm_id; }
static inline xcb_extension_t *cxcb_xfixes_extension(void) { return &xcb_xfixes_id; }
static inline xcb_extension_t *cxcb_randr_extension(void) { return &xcb_randr_id; }
static inline xcb_extension_t *cxcb_damage_extension(void) { return &xcb_damage_id; }
static inline xcb_extension_t *cxcb_composite_extension(void) { return &xcb_composite_id; }
