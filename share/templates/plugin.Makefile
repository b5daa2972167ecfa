# Builds @NAME@.so from @NAME@.cu, with @NAME@.json embedded, and checks the
# pair with soren-host check: run `make` (`make install` to install it).
# The rules are Soren's plugin.mk, found with pkg-config.  Where Soren is
# installed outside the system's folders, first tell pkg-config where:
#     export PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
NAME = @NAME@
PKG_CONFIG ?= pkg-config
SOREN_PKGDATADIR := $(shell $(PKG_CONFIG) --variable=pkgdatadir soren 2>/dev/null)
ifeq ($(SOREN_PKGDATADIR),)
$(error pkg-config cannot find soren: add the folder that holds soren.pc (PREFIX/lib/pkgconfig) to PKG_CONFIG_PATH)
endif
include $(SOREN_PKGDATADIR)/plugin.mk
