/* A plugin table shorter than the ABI's: the host must not read past it. */
#include <soren/soren.h>

const soren_plugin_table soren_plugin_v1 = {SOREN_ABI_MAJOR, 0, 16, 0, "small_table", 0, 0, {0}};
