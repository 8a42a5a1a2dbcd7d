/* cg_toggle(): callgrind's client request to toggle collection (run with --collect-atstart=no). */
#include <valgrind/callgrind.h>
void cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
