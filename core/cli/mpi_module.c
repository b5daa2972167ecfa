/* mpi_module.c - finding and loading soren-mpi.so (mpi.h). */
#include "mpi.h"

#include <dlfcn.h>
#include <stdlib.h>

soren_status soren__mpi_module_load(const soren_mpi_module **m, soren_error *err)
{
    const char *env = getenv("SOREN_MPI_MODULE");
    const char *path = env && *env ? env : SOREN_MPI_MODULE_PATH;
    *m = NULL;
    /* Global: Open MPI's components, which libmpi loads in turn, resolve
     * its symbols in the global scope. */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "mpirun started soren-host, but its MPI module did not load: %s; "
                               "reinstall soren (make install puts it at %s), or name the "
                               "module with SOREN_MPI_MODULE",
                               dlerror(), SOREN_MPI_MODULE_PATH);
    *m = (const soren_mpi_module *)dlsym(h, SOREN_MPI_MODULE_SYMBOL);
    if (!*m)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s is not soren's MPI module (it has no %s): reinstall soren, "
                               "or point SOREN_MPI_MODULE at the soren-mpi.so of this build",
                               path, SOREN_MPI_MODULE_SYMBOL);
    return SOREN_OK;
}
