# Build and install broadcastd.
#   make                                   release build, Swift standard library linked in statically
#   sudo make install                      into /usr/local; or: make install PREFIX=$HOME/.local
#   make install DESTDIR=/tmp/pkg PREFIX=/usr   staged, for packaging
#   make uninstall                         removes what install put there (same PREFIX, DESTDIR)
# install does not build (so `sudo make install` writes nothing into .build as root): run make first.
# BIN picks the build to install from (the tests pass their debug build directory);
# SWIFTFLAGS adds to `swift build` (e.g. --scratch-path DIR, then BIN=DIR/release).

PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
SWIFTFLAGS ?=
BIN ?= .build/release

PROGRAMS := broadcastd broadcastctl broadcast-setup
# Handlers go in bin/ beside broadcastd: a manifest's bare `exec` name is looked for next to the
# broadcastd executable, then on PATH (HandlerRegistry.resolveExecutable), never in libexec/.
# broadcast-encoder is the shared encoder (#35): broadcastd runs it, found the same way, from a built-in manifest.
HANDLERS := broadcast-handler-inspect broadcast-handler-record broadcast-handler-stream broadcast-handler-replay \
	broadcast-encoder
MANUALS := $(PROGRAMS:%=docs/man/%.1)
MANIFESTS := $(wildcard share/broadcastd/handlers/*.json)
UNITS := $(wildcard systemd/*.service systemd/*.socket)

bindir := $(PREFIX)/bin
datadir := $(PREFIX)/share
handlerdir := $(datadir)/broadcastd/handlers
mandir := $(datadir)/man/man1
bashdir := $(datadir)/bash-completion/completions
zshdir := $(datadir)/zsh/site-functions
fishdir := $(datadir)/fish/vendor_completions.d
# systemd --user reads $(PREFIX)/lib/systemd/user for /usr and /usr/local, but in a home
# directory only ~/.local/share/systemd/user ($XDG_DATA_HOME/systemd/user).
ifeq ($(PREFIX),$(HOME)/.local)
userunitdir ?= $(datadir)/systemd/user
else
userunitdir ?= $(PREFIX)/lib/systemd/user
endif

.PHONY: all install uninstall
all:
	$(SWIFT) build -c release --static-swift-stdlib $(SWIFTFLAGS)

install:
	@for p in $(PROGRAMS) $(HANDLERS); do test -x $(BIN)/$$p || { echo "$(BIN)/$$p is missing: run make first" >&2; exit 1; }; done
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(handlerdir) $(DESTDIR)$(mandir) $(DESTDIR)$(userunitdir) \
		$(DESTDIR)$(bashdir) $(DESTDIR)$(zshdir) $(DESTDIR)$(fishdir)
	install -m 755 $(addprefix $(BIN)/,$(PROGRAMS) $(HANDLERS)) $(DESTDIR)$(bindir)/
	install -m 644 $(MANIFESTS) $(DESTDIR)$(handlerdir)/
	install -m 644 $(MANUALS) $(DESTDIR)$(mandir)/
# Units name broadcastd by wherever it was installed (the repository's copies say /usr/local/bin).
	for u in $(UNITS); do \
		sed 's|[^ =]*/bin/broadcastd\b|$(bindir)/broadcastd|g' $$u > $(DESTDIR)$(userunitdir)/$${u##*/} && \
		chmod 644 $(DESTDIR)$(userunitdir)/$${u##*/} || exit 1; done
# Completion scripts come from the programs themselves (swift-argument-parser).
	for p in $(PROGRAMS); do \
		$(BIN)/$$p --generate-completion-script bash > $(DESTDIR)$(bashdir)/$$p && \
		$(BIN)/$$p --generate-completion-script zsh > $(DESTDIR)$(zshdir)/_$$p && \
		$(BIN)/$$p --generate-completion-script fish > $(DESTDIR)$(fishdir)/$$p.fish || exit 1; done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(PROGRAMS) $(HANDLERS)) \
		$(addprefix $(DESTDIR)$(handlerdir)/,$(notdir $(MANIFESTS))) \
		$(addprefix $(DESTDIR)$(mandir)/,$(notdir $(MANUALS))) \
		$(addprefix $(DESTDIR)$(userunitdir)/,$(notdir $(UNITS))) \
		$(addprefix $(DESTDIR)$(bashdir)/,$(PROGRAMS)) \
		$(addprefix $(DESTDIR)$(zshdir)/_,$(PROGRAMS)) \
		$(addprefix $(DESTDIR)$(fishdir)/,$(PROGRAMS:=.fish))
	rmdir $(DESTDIR)$(handlerdir) $(DESTDIR)$(datadir)/broadcastd 2>/dev/null || true
