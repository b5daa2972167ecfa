# plugin.mk - build a Soren plugin with one `make` (installed with Soren).
#
# A plugin's Makefile sets NAME and includes this file, as the Makefile that
# `soren-host new NAME` writes does; `make` then turns NAME.cu and NAME.json
# into NAME.so the way Soren builds its own plugins:
#   - NAME.json is embedded into NAME.so (embed-manifest), so that soren-host
#     can tell a library from a stale manifest beside it; its "sha256" member
#     is left out, so that NAME.json can pin the digest of the NAME.so built
#     from it (sha256sum NAME.so) without a rebuild;
#   - nvcc compiles for the GPU architectures Soren was built for (plus PTX of
#     the newest, for later GPUs) and links the shared CUDA runtime, the one
#     soren-host uses: one runtime per process, so device memory and streams
#     pass between them;
#   - the library exports only its table, soren_plugin_v1 (plugin.map);
#   - NAME.so and NAME.json are left without group and other write
#     permission, which soren-host requires of a plugin (an editor or a
#     umask of 002 may have given NAME.json some).
# Everything comes from `pkg-config soren`.
#
# Targets: all (NAME.so), check (soren-host check ./NAME.json), install
# (NAME.so and NAME.json into PLUGINDIR, by default your own plugin folder,
# where `soren-host run NAME` finds them), clean.
#
# Variables to set on the command line: CUDA_ARCH_FLAGS (e.g. -arch=sm_90:
# your GPU only, a faster build), NVCCFLAGS (more flags, e.g. -lineinfo),
# NVCC, PLUGINDIR, SOREN_HOST, PKG_CONFIG.

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
CUDA_ARCH_FLAGS ?= $(call soren_variable,nvcc_arch_flags)
CUDA_LIBDIR ?= $(call soren_variable,cuda_libdir)
EMBED_MANIFEST ?= $(call soren_variable,embed_manifest)
SOREN_HOST ?= soren-host
PLUGINDIR ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/soren/plugins

all: $(NAME).so

# Replaced only when it changes: the embedded copy leaves out the sha256 pin,
# so pinning NAME.json after a build does not rebuild NAME.so (and change
# the digest just pinned).
$(NAME)-manifest.c: $(NAME).json
	sh '$(EMBED_MANIFEST)' $(NAME).json > $@.tmp && \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(NAME).so: $(NAME).cu $(NAME)-manifest.c
	$(NVCC) -std=c++17 -O3 $(CUDA_ARCH_FLAGS) $(SOREN_CFLAGS) $(NVCCFLAGS) \
	  -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -cudart shared \
	  -Xlinker --version-script='$(SOREN_PKGDATADIR)/plugin.map' \
	  -Xlinker -rpath='$(CUDA_LIBDIR)' \
	  -o $@ $(NAME).cu $(NAME)-manifest.c
	chmod go-w $@ $(NAME).json

check: $(NAME).so
	$(SOREN_HOST) check ./$(NAME).json

install: $(NAME).so
	install -d -m 755 '$(PLUGINDIR)'
	install -m 644 $(NAME).so $(NAME).json '$(PLUGINDIR)'

clean:
	rm -f $(NAME).so $(NAME)-manifest.c $(NAME)-manifest.c.tmp

.PHONY: all check install clean
