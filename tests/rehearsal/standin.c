/* The object every stand-in library and tool of the rehearsal is made of: real aarch64 code, no upstream code. */
const char *flagtree_rehearsal_standin(void) { return "stand-in built by the rehearsal tests"; }

#ifdef STANDIN_MAIN
#include <stdio.h>
int main(int argc, char **argv) {
    (void)argc;
    printf("%s: %s\n", argv[0], flagtree_rehearsal_standin());
    return 0;
}
#endif
