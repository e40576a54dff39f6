// libdbus-1: the D-Bus client library broadcastd talks to xdg-desktop-portal with.
#include <dbus/dbus.h>
