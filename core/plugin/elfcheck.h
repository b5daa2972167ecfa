/*
 * elfcheck.h - a look at a plugin's library before dlopen maps it.
 *
 * dlopen trusts the file it is given: a library cut short (an interrupted
 * copy) has loadable segments past its end, which the loader maps and then
 * touches, and the process dies of SIGBUS; a library built for another
 * machine is reported as "No such file or directory".  soren__elf_check
 * reads the ELF header and the program headers, and refuses with a message
 * that says what to do a file that is not an ELF shared object of this
 * machine's kind (64-bit, this byte order, this architecture), or whose
 * headers or loadable segments lie past its end.  It proves nothing else
 * about the file: dlopen still reports what it finds.
 */
#ifndef SOREN_ELFCHECK_H
#define SOREN_ELFCHECK_H

#include "../error.h"

/* SOREN_OK if the file open on fd (found at path) looks loadable; else
 * SOREN_EPLUGIN (SOREN_EIO when it cannot be read) naming path. */
soren_status soren__elf_check(int fd, const char *path, soren_error *err);

#endif /* SOREN_ELFCHECK_H */
