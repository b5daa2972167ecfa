# plugin.mk - build a Soren plugin with one `make` (installed with Soren).
#
# A plugin's Makefile sets NAME and includes this file, as the Makefile that
# `soren-host new NAME` writes does; `make` then turns NAME.cu and NAME.json
# into NAME.so the way Soren builds its own plugins, and checks the pair:
#   - NAME.cu compiles to build/NAME.o, and NAME.json is embedded into an
#     object of its own (embed-manifest, build/NAME-manifest.o), so that an
#     edit of the manifest rebuilds that small object and relinks, without
#     compiling the CUDA again; the embedded copy lets soren-host tell a
#     library from a stale manifest beside it.  Its "sha256" member is left
#     out, so that NAME.json can pin the digest of the NAME.so built from it
#     (sha256sum NAME.so) without a rebuild;
#   - `make` compiles for the local GPU's architecture (nvidia-smi), or
#     CUDA_ARCH where named; `make release` and `make install` compile for
#     the architectures Soren was built for, plus PTX of the newest for
#     later GPUs (the portable set);
#   - the library links the shared CUDA runtime, the one soren-host uses: one
#     runtime per process, so device memory and streams pass between them;
#   - the library exports only its table, soren_plugin_v1 (plugin.map);
#   - NAME.so and NAME.json are left without group and other write
#     permission, which soren-host requires of a plugin (an editor or a
#     umask of 002 may have given NAME.json some);
#   - the build ends with `soren-host check ./NAME.json`: a manifest that
#     breaks the schema, or that disagrees with the library (a key or value
#     type, a stage), fails `make` with soren-host's message.
# Everything comes from `pkg-config soren`.
#
# Targets: all (NAME.so, checked), release (all, for the portable set),
# check (soren-host check ./NAME.json), install (release, then NAME.so and
# NAME.json into PLUGINDIR, by default your own plugin folder, where
# `soren-host run NAME` finds them), clean (NAME.so and build/).
#
# Variables to set on the command line: CUDA_ARCH (the architectures of a
# local build, e.g. sm_90 or "sm_80 sm_90"; default: those of the GPUs
# nvidia-smi lists, else the newest Soren was built for), CUDA_ARCH_FLAGS
# (nvcc's architecture flags for every target, release included), NVCCFLAGS
# (more flags, e.g. -lineinfo), NVCC, PLUGINDIR, SOREN_HOST, PKG_CONFIG.

ifndef NAME
$(error plugin.mk: set NAME (the job's name, as in NAME.cu and NAME.json) before including plugin.mk)
endif

PKG_CONFIG ?= pkg-config
soren_variable = $(shell $(PKG_CONFIG) --variable=$(1) soren 2>/dev/null)
SOREN_PKGDATADIR := $(call soren_variable,pkgdatadir)
ifeq ($(SOREN_PKGDATADIR),)
$(error pkg-config cannot find soren: add the folder that holds soren.pc (PREFIX/lib/pkgconfig) to PKG_CONFIG_PATH)
endif
SOREN_CFLAGS := $(shell $(PKG_CONFIG) --cflags soren)
NVCC ?= $(call soren_variable,nvcc)
CUDA_LIBDIR ?= $(call soren_variable,cuda_libdir)
EMBED_MANIFEST ?= $(call soren_variable,embed_manifest)
# The soren-host installed with this SDK; the one on PATH where soren.pc
# names none or it is not there (a staged installation).
ifndef SOREN_HOST
SOREN_HOST := $(call soren_variable,soren_host)
SOREN_HOST := $(if $(wildcard $(SOREN_HOST)),$(SOREN_HOST),soren-host)
endif
PLUGINDIR ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/soren/plugins

# The portable set: the architectures Soren was built for, plus PTX.
PORTABLE_ARCH_FLAGS := $(call soren_variable,nvcc_arch_flags)
# The local one: each distinct compute capability nvidia-smi reports (9.0
# becomes sm_90); without a GPU, the newest of the portable set.
ifndef CUDA_ARCH
CUDA_ARCH := $(sort $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | \
  sed -n 's/^ *\([0-9][0-9]*\)\.\([0-9][0-9]*\) *$$/sm_\1\2/p'))
ifeq ($(CUDA_ARCH),)
CUDA_ARCH := sm_$(lastword $(subst code=compute_, ,$(lastword $(PORTABLE_ARCH_FLAGS))))
endif
endif
# release and install build for the portable set, the rest for the local
# one; a CUDA_ARCH_FLAGS set by the user wins over both.
ifneq ($(filter release install,$(MAKECMDGOALS)),)
CUDA_ARCH_FLAGS ?= $(PORTABLE_ARCH_FLAGS)
else
CUDA_ARCH_FLAGS ?= $(foreach a,$(CUDA_ARCH),-gencode=arch=compute_$(a:sm_%=%),code=$(a))
endif

all: $(NAME).so build/checked

release: all

# build/cuda-flags holds the flags build/NAME.o is compiled with, rewritten
# (as the makefile is read, so that `make -n` sees it too) only when they
# change: switching between a local and a release build recompiles.
BUILD_FLAGS := $(strip $(NVCC) $(CUDA_ARCH_FLAGS) $(SOREN_CFLAGS) $(NVCCFLAGS))
ifneq ($(MAKECMDGOALS),clean)
$(shell mkdir -p build && echo '$(BUILD_FLAGS)' > build/cuda-flags.tmp && \
  if cmp -s build/cuda-flags.tmp build/cuda-flags; then rm -f build/cuda-flags.tmp; \
  else mv build/cuda-flags.tmp build/cuda-flags; fi)
endif

# Made here where it is missing: after `make clean all`, whose clean removed it.
build/cuda-flags:
	mkdir -p build && echo '$(BUILD_FLAGS)' > $@

build/$(NAME).o: $(NAME).cu build/cuda-flags
	$(NVCC) -std=c++17 -O3 $(CUDA_ARCH_FLAGS) $(SOREN_CFLAGS) $(NVCCFLAGS) \
	  -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -c -o $@ $(NAME).cu

# Replaced only when it changes: the embedded copy leaves out the sha256 pin,
# so pinning NAME.json after a build does not rebuild NAME.so (and change
# the digest just pinned).
build/$(NAME)-manifest.c: $(NAME).json
	mkdir -p build && sh '$(EMBED_MANIFEST)' $(NAME).json > $@.tmp && \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

build/$(NAME)-manifest.o: build/$(NAME)-manifest.c
	$(NVCC) -Xcompiler -fPIC -c -o $@ build/$(NAME)-manifest.c

$(NAME).so: build/$(NAME).o build/$(NAME)-manifest.o
	$(NVCC) -shared -cudart shared \
	  -Xlinker --version-script='$(SOREN_PKGDATADIR)/plugin.map' \
	  -Xlinker -rpath='$(CUDA_LIBDIR)' \
	  -o $@ build/$(NAME).o build/$(NAME)-manifest.o
	chmod go-w $@ $(NAME).json

# The manifest against the schema and the library against the manifest,
# again whenever either changes; a failure leaves no stamp, so the next
# `make` checks again.
build/checked: $(NAME).so $(NAME).json
	chmod go-w $(NAME).json
	$(SOREN_HOST) check ./$(NAME).json
	touch $@

check: $(NAME).so
	$(SOREN_HOST) check ./$(NAME).json

install: release
	install -d -m 755 '$(PLUGINDIR)'
	install -m 644 $(NAME).so $(NAME).json '$(PLUGINDIR)'

clean:
	rm -rf $(NAME).so build

.PHONY: all release check install clean
