/* A shared object that is not a Soren plugin: it lacks soren_plugin_v1. */
int soren_test_not_a_plugin(void);
int soren_test_not_a_plugin(void) { return 1; }
