/* elfcheck.c - a plugin library's ELF headers, checked before dlopen
 * (elfcheck.h). */
#include "elfcheck.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#else
#error "soren: name this architecture's ELF e_machine in core/plugin/elfcheck.c"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

static const char *machine_name(unsigned machine, char *buf, size_t size)
{
    switch (machine) {
    case EM_X86_64: return "x86-64";
    case EM_386: return "i386";
    case EM_AARCH64: return "aarch64";
    case EM_ARM: return "32-bit arm";
    case EM_PPC64: return "ppc64";
    case EM_RISCV: return "risc-v";
    case EM_S390: return "s390";
    }
    snprintf(buf, size, "ELF machine %u", machine);
    return buf;
}

/* Reads exactly size bytes at offset; 0 on success, else an errno (EIO
 * standing for a file that ends first). */
static int read_at(int fd, void *buf, size_t size, uint64_t offset)
{
    ssize_t n = pread(fd, buf, size, (off_t)offset);
    if (n < 0)
        return errno;
    return (size_t)n == size ? 0 : EIO;
}

static soren_status not_elf(const char *path, soren_error *err)
{
    return soren_error_set(err, SOREN_EPLUGIN,
                           "%s is not a shared library (no ELF header): rebuild the plugin "
                           "(make), or install its NAME.so again", path);
}

static soren_status check_header(const char *path, const Elf64_Ehdr *h, soren_error *err)
{
    char buf[32], host[32];
    if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0)
        return not_elf(path, err);
    if (h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_ident[EI_DATA] != HOST_DATA)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s is a %s %s-endian ELF file, this soren-host loads 64-bit "
                               "%s-endian ones: rebuild the plugin on this machine", path,
                               h->e_ident[EI_CLASS] == ELFCLASS32   ? "32-bit"
                               : h->e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit"
                                                                    : "unknown-class",
                               h->e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little",
                               HOST_DATA == ELFDATA2LSB ? "little" : "big");
    if (h->e_type != ET_DYN)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s is an ELF %s, not a shared library: build the plugin with "
                               "-shared (share/plugin.mk does)", path,
                               h->e_type == ET_EXEC ? "executable"
                               : h->e_type == ET_REL ? "object file" : "file of another type");
    if (h->e_machine != HOST_MACHINE)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s is built for %s, this soren-host runs on %s: rebuild the "
                               "plugin on this machine", path,
                               machine_name(h->e_machine, buf, sizeof buf),
                               machine_name(HOST_MACHINE, host, sizeof host));
    if (h->e_phentsize != sizeof(Elf64_Phdr) || h->e_phnum == 0)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s has no usable program headers: it is corrupt; rebuild the "
                               "plugin", path);
    return SOREN_OK;
}

static soren_status truncated(const char *path, uint64_t need, uint64_t size, soren_error *err)
{
    return soren_error_set(err, SOREN_EPLUGIN,
                           "%s is truncated: its ELF headers describe %llu bytes, the file has "
                           "%llu: "
                           "copy it again, or rebuild the plugin", path,
                           (unsigned long long)need, (unsigned long long)size);
}

/* Every loadable segment's bytes must be in the file. */
static soren_status check_segments(const char *path, int fd, const Elf64_Ehdr *h, uint64_t size,
                                   soren_error *err)
{
    uint64_t table_end = h->e_phoff + (uint64_t)h->e_phnum * sizeof(Elf64_Phdr);
    if (h->e_phoff > size || table_end > size)
        return truncated(path, table_end, size, err);
    for (unsigned i = 0; i < h->e_phnum; i++) {
        Elf64_Phdr ph;
        int e = read_at(fd, &ph, sizeof ph, h->e_phoff + (uint64_t)i * sizeof ph);
        if (e)
            return soren_error_errno(err, SOREN_EIO, e, "cannot read %s", path);
        if (ph.p_type != PT_LOAD)
            continue;
        if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
            return truncated(path, ph.p_filesz > UINT64_MAX - ph.p_offset
                                       ? UINT64_MAX : ph.p_offset + ph.p_filesz, size, err);
    }
    return SOREN_OK;
}

soren_status soren__elf_check(int fd, const char *path, soren_error *err)
{
    struct stat st;
    Elf64_Ehdr h;
    soren_status rc = SOREN_OK;
    int e = 0;
    if (fstat(fd, &st) != 0) {
        e = errno;
        rc = soren_error_errno(err, SOREN_EIO, e, "cannot read %s", path);
    } else if (!S_ISREG(st.st_mode)) {
        rc = soren_error_set(err, SOREN_EPLUGIN, "%s is not a regular file: a plugin's library "
                             "is a shared object, NAME.so", path);
    } else if ((uint64_t)st.st_size < sizeof h) {
        rc = not_elf(path, err);
    } else if ((e = read_at(fd, &h, sizeof h, 0)) != 0) {
        rc = soren_error_errno(err, SOREN_EIO, e, "cannot read %s", path);
    } else {
        rc = check_header(path, &h, err);
        if (rc == SOREN_OK)
            rc = check_segments(path, fd, &h, (uint64_t)st.st_size, err);
    }
    return rc;
}
