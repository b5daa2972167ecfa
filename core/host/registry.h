/*
 * registry.h - the plugins a resident host keeps loaded, by name.
 *
 * Each name has at most one current plugin.  A job takes a reference to
 * the current one (loading it first where none is, or where its manifest
 * or library changed on disk since), and gives it back when it ends;
 * loading a plugin again, or unloading it, retires the current one, which
 * is closed (its library unloaded) once its last job gives it back.
 * Libraries are loaded from private copies (soren_plugin_open_copy), so a
 * library rebuilt at the same path loads as the new code.  Each plugin
 * also keeps the GPU sessions of its jobs between runs, by job.
 * Every function is safe from any thread.
 */
#ifndef SOREN_HOST_REGISTRY_H
#define SOREN_HOST_REGISTRY_H

#include <stddef.h>
#include <stdio.h>

#include "../engine/job.h"
#include "../plugin/loader.h"

typedef struct soren_registry soren_registry;
typedef struct soren_loaded soren_loaded;

/* copy_dir: where the library copies are made (a folder only this user
 * can write); trust: as soren_plugin_open. */
soren_registry *soren_registry_new(const char *copy_dir);
/* Closes every plugin; no job may hold one. */
void soren_registry_free(soren_registry *r);

/* Loads the plugin of manifest path as the current one of its name,
 * retiring the one before. */
soren_status soren_registry_load(soren_registry *r, const char *manifest_path,
                                 soren_trust trust, soren_error *err);
/* Retires the current plugin called name. */
soren_status soren_registry_unload(soren_registry *r, const char *name, soren_error *err);

/* The current plugin of manifest path for a job (loaded where it must
 * be), which the job gives back with soren_registry_release. */
soren_status soren_registry_acquire(soren_registry *r, const char *manifest_path,
                                    soren_trust trust, soren_loaded **out, soren_error *err);
void soren_registry_release(soren_registry *r, soren_loaded *l);

const soren_plugin *soren_loaded_plugin(const soren_loaded *l);
/* What the plugin's last run through soren_run here read and left: its
 * input's bytes (0: no run yet, or input of unknown size) and the pairs
 * its first stage left, which the host's choice of GPUs reads
 * (soren_choose_devices). */
void soren_loaded_last_run(soren_registry *r, soren_loaded *l, uint64_t *bytes, uint64_t *pairs);
void soren_loaded_note_run(soren_registry *r, soren_loaded *l, uint64_t bytes, uint64_t pairs);
/* The set of SOREN_RUN_SESSIONS GPU sessions (SOREN_RANK_SESSIONS for each
 * GPU of a run over several) that the job key names, for one job's run
 * at a time; NULL where key is NULL
 * (the run sets up anew) or memory ran out.  A session keeps the variant
 * its first run chose, so a key names a job whose runs should share it:
 * the same inputs, or one library job's runs.  A key the plugin has none
 * for takes its least recently used idle set, forgotten
 * (soren_gpu_session_forget): the job's first run renews them and chooses
 * afresh, on streams, pinned buffers and device blocks already there.
 * Given back with soren_loaded_give_sessions once the run ended; a plugin
 * keeps the sessions of its last 8 keys. */
soren_gpu_session **soren_loaded_take_sessions(soren_registry *r, soren_loaded *l,
                                              const char *key);
void soren_loaded_give_sessions(soren_registry *r, soren_loaded *l, soren_gpu_session **set);

/* Frees the sessions no job is using, of every plugin: the device memory
 * they hold, for a job that needs it. */
void soren_registry_drop_idle_sessions(soren_registry *r);

/* One line a current plugin on f: name, version, manifest, jobs running. */
void soren_registry_print(soren_registry *r, FILE *f);

#endif /* SOREN_HOST_REGISTRY_H */
