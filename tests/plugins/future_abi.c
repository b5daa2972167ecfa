/* A plugin table from a future ABI major version the host must refuse. */
#include <soren/soren.h>

const soren_plugin_table soren_plugin_v1 = {SOREN_ABI_MAJOR + 1, 0, sizeof(soren_plugin_table),
                                            0, "future_abi", 0, 0, {0}};
