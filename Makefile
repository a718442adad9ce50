# keyshare: `make demo` runs the main job, `make test` runs every test.
# Both work on a fresh Debian 12 machine as root: `make deps` installs what is missing.

PREFIX        ?= /usr/local
SWIFT         ?= swift
BUILD_FLAGS   := -c release -Xswiftc -static-stdlib --disable-local-rpath
BIN_DIR       := $(shell pwd)/.build/release
MODULE        := $(BIN_DIR)/libkeyshare-pkcs11.so
KEYSHARE      := $(BIN_DIR)/keyshare
DEB_PACKAGES  := libssl-dev libsqlite3-dev libp11-kit-dev p11-kit opensc softhsm2 gnutls-bin \
                 libengine-pkcs11-openssl openssh-client libnss3-tools zip unzip openssl python3 pkg-config strace \
                 p11-kit-modules openssh-server openvpn curl iproute2 openjdk-17-jdk-headless \
                 pcscd vsmartcard-vpcd opensc-pkcs11 libcacard-dev util-linux \
                 swtpm swtpm-tools tpm2-tools libtpm2-pkcs11-1 libtpm2-pkcs11-tools
P11_MODULE_DIR  = $(shell pkg-config --variable=p11_module_path p11-kit-1 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/pkcs11)
P11_CONFIG_DIR  = $(shell pkg-config --variable=p11_module_configs p11-kit-1 2>/dev/null || echo /usr/share/p11-kit/modules)

.PHONY: all deps build test unit-test integration-test test-cards demo install uninstall clean bench stress fuzz

all: build

## deps: install the Debian packages keyshare builds and tests with (only those missing).
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\n# keyshare make deps: do not start services (sshd, openvpn) while installing\nexit 101\n' \
	      | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null && $$SUDO chmod 755 /usr/sbin/policy-rc.d && policy=1; \
	  fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; rc=$$?; \
	  [ -z "$$policy" ] || $$SUDO rm -f /usr/sbin/policy-rc.d; \
	  exit $$rc; \
	fi

## build: release binaries with the Swift runtime linked in (the module must be self-contained).
build: deps
	$(SWIFT) build $(BUILD_FLAGS) --product keyshare
	$(SWIFT) build $(BUILD_FLAGS) --product keyshare-pkcs11
	@echo "built $(KEYSHARE)"
	@echo "built $(MODULE)"

unit-test: deps
	$(SWIFT) test

integration-test: build
	@KEYSHARE_IT_SKIP=41-cards bash Tests/integration/run-all.sh "$(KEYSHARE)" "$(MODULE)"

## The virtual CAC card of the smart-card tests (libcacard bridged to pcscd's vpcd reader).
CARD_BRIDGE := .build/cards/vcac-bridge
$(CARD_BRIDGE): Tests/cards/vcac-bridge.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -o $@ $< $$(pkg-config --cflags --libs libcacard)

## test-cards: the real smart-card stack (pcscd + vpcd + a virtual CAC card + OpenSC, in private network and
## mount namespaces: needs root or user namespaces; fails, never skips, where it cannot run). CARD_CYCLES=10.
CARD_CYCLES ?= 10
test-cards: build $(CARD_BRIDGE)
	@CARD_CYCLES=$(CARD_CYCLES) VCAC_BRIDGE=$(abspath $(CARD_BRIDGE)) bash Tests/integration/41-cards.sh "$(KEYSHARE)" "$(MODULE)"

## test: every test: unit tests, the integration scripts against the real consumers, the smart-card stack.
test: unit-test integration-test test-cards

## demo: the main job on a throwaway store under ./demo (or $$KEYSHARE_HOME).
demo: build
	@bash Tests/integration/demo.sh "$(KEYSHARE)" "$(MODULE)"

## bench: keyshare's module vs SoftHSM2 vs raw OpenSSL, one table (docs/benchmarks.md); BENCH_SMOKE=1 for a quick run.
BENCH_BIN := Benchmarks/p11bench
$(BENCH_BIN): Benchmarks/p11bench.c
	$(CC) -O2 -Wall -I/usr/include/p11-kit-1 $$(pkg-config --cflags p11-kit-1 2>/dev/null) -o $@ $< -lcrypto -lsqlite3 -ldl -lpthread

bench: build $(BENCH_BIN)
	@bash Benchmarks/run.sh "$(KEYSHARE)" "$(MODULE)" "$(BENCH_BIN)"

## stress: long reliability runs (docs/reliability.md): 4 processes x 2 threads x 1000 operations with the
## CLI alongside, 200 SIGKILLs, 50 smart-card insert/remove cycles per event path (docs/benchmarks.md),
## and the in-process run under ThreadSanitizer (module in .build-tsan).
SANITIZE := KEYSHARE_SANITIZE=1 $(SWIFT) build -c release
stress: build $(CARD_BRIDGE)
	@bash Tests/stress/stress.sh "$(KEYSHARE)" "$(MODULE)" 4 2 1000 20
	@CARD_CYCLES=50 VCAC_BRIDGE=$(abspath $(CARD_BRIDGE)) bash Tests/integration/41-cards.sh "$(KEYSHARE)" "$(MODULE)"
	@bash Tests/stress/crash.sh "$(KEYSHARE)" "$(MODULE)" 200
	$(SANITIZE) --scratch-path .build-tsan -Xswiftc -sanitize=thread --product keyshare-pkcs11
	@bash Tests/stress/tsan.sh "$(KEYSHARE)" .build-tsan/release/libkeyshare-pkcs11.so 4 1000

## fuzz: the C ABI sweep under ASan/LSan, then libFuzzer + ASan on the PKCS #12, X.509, password-request and
## module template/mechanism parsers, FUZZ_SECONDS each (default 450: 30 minutes in all). Build in .build-fuzz.
fuzz: build
	$(SANITIZE) --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address --product keyshare-fuzz
	$(SANITIZE) --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address --product keyshare-pkcs11
	@bash Tests/fuzz/abi-asan.sh "$(KEYSHARE)" .build-fuzz/release/libkeyshare-pkcs11.so
	@bash Tests/fuzz/run-fuzz.sh "$(KEYSHARE)" .build-fuzz/release

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(P11_MODULE_DIR) $(DESTDIR)$(P11_CONFIG_DIR)
	install -m 0755 $(KEYSHARE) $(DESTDIR)$(PREFIX)/bin/keyshare
	install -m 0644 $(MODULE) $(DESTDIR)$(P11_MODULE_DIR)/libkeyshare-pkcs11.so
	install -m 0644 pkcs11/keyshare.module $(DESTDIR)$(P11_CONFIG_DIR)/keyshare.module

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/keyshare $(DESTDIR)$(P11_MODULE_DIR)/libkeyshare-pkcs11.so $(DESTDIR)$(P11_CONFIG_DIR)/keyshare.module

clean:
	rm -rf .build demo
