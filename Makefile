# keyshare: `make demo` runs the main job, `make test` runs every test.
# Both work on a fresh Debian 12 machine as root: `make deps` installs what is missing.

PREFIX        ?= /usr/local
SWIFT         ?= swift
BUILD_FLAGS   := -c release -Xswiftc -static-stdlib --disable-local-rpath
BIN_DIR       := $(shell pwd)/.build/release
MODULE        := $(BIN_DIR)/libkeyshare-pkcs11.so
ENGINE        := $(BIN_DIR)/libkeyshare-engine.so
KEYSHARE      := $(BIN_DIR)/keyshare
DEB_PACKAGES  := libssl-dev libsqlite3-dev libp11-kit-dev p11-kit opensc softhsm2 gnutls-bin \
                 libengine-pkcs11-openssl openssh-client libnss3-tools zip unzip openssl python3 python3-cryptography python3-pykcs11 python3-venv pkg-config strace \
                 p11-kit-modules openssh-server openvpn curl iproute2 openjdk-17-jdk-headless gdb sqlite3 \
                 pcscd vsmartcard-vpcd opensc-pkcs11 libcacard-dev util-linux \
                 swtpm swtpm-tools tpm2-tools libtpm2-pkcs11-1 libtpm2-pkcs11-tools systemd libtss2-dev \
                 libzstd-dev zlib1g-dev libbrotli-dev libsystemd-dev bubblewrap libpam-p11 pamtester cryptsetup-bin pinentry-curses \
                 gnupg debian-archive-keyring
# 89-browsers: the browsers that open a client-certificate site, and X for the screenshots.
DEB_PACKAGES  += firefox-esr chromium xvfb xauth imagemagick
# `make thirdparty` (Tests/conformance/run-thirdparty.sh, not part of `make test`) builds OpenSC's
# p11test (0.23.0 sources) and crypto11's tests (Debian's 1.2.5) into a cache outside the tree with these.
THIRDPARTY_PACKAGES := libcmocka-dev autoconf automake libtool golang-go golang-github-thalesignite-crypto11-dev \
                 golang-github-stretchr-testify-dev
# make bench (issue 30): a TLS server's handshakes with its key through the libp11 engine (Benchmarks/nginx.sh).
DEB_PACKAGES  += nginx
## The crypto engine (docs/architecture.md, "The crypto engine"). OPENSSL=auto (default): the system
## libcrypto where it is 3.5 or newer (linked dynamically), else Debian 13's OpenSSL fetched into
## $(OPENSSL_BUNDLE) (checksums pinned below) and linked statically into the module, the agent and the
## CLI. OPENSSL=system: the system libcrypto whatever its version (Debian 12: 3.0, no post-quantum
## mechanisms). OPENSSL=bundled: the fetched one whatever the system has.
OPENSSL       ?= auto
OPENSSL_DEB_VERSION       := 3.5.9-1~deb13u1
OPENSSL_DEB_SHA256_DEV    := 9988be213bb31bb87b07a61e6e201b1b570b500a607e4449725442add3a4d3e8
OPENSSL_DEB_SHA256_LEGACY := 67c70904c8d494b4631e136a6bdb692cbb44515757d63c55e7bd1d2016f9f09f
OPENSSL_BUNDLE := $(CURDIR)/.build/openssl-3.5
OPENSSL_STAMP  := $(OPENSSL_BUNDLE)/stamp-$(OPENSSL_DEB_VERSION)
SYSTEM_OPENSSL := $(shell pkg-config --modversion libcrypto 2>/dev/null)
# The caller's pkg-config path before a bundled build puts the bundle first: the system-OpenSSL check
# of `make test` (unit-test-system-openssl) builds with this one.
SYSTEM_PKG_CONFIG_PATH := $(PKG_CONFIG_PATH)
ifeq ($(OPENSSL),auto)
OPENSSL_MODE  := $(shell dpkg --compare-versions "$(or $(SYSTEM_OPENSSL),0)" ge 3.5 && echo system || echo bundled)
else ifneq ($(filter system bundled,$(OPENSSL)),)
OPENSSL_MODE  := $(OPENSSL)
else
$(error OPENSSL=$(OPENSSL): use auto, system or bundled)
endif
ifeq ($(OPENSSL_MODE),bundled)
# SwiftPM's COpenSSL target reads libcrypto.pc: the bundle's comes first (every swift invocation below).
export PKG_CONFIG_PATH := $(OPENSSL_BUNDLE)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
OPENSSL_DEP   := $(OPENSSL_STAMP)
else
OPENSSL_DEP   :=
endif

P11_MODULE_DIR  = $(shell pkg-config --variable=p11_module_path p11-kit-1 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/pkcs11)
# The engine (libkeyshare-engine.so) beside the module's directory, whatever PREFIX is: the module
# finds it at ../keyshare/ and the launcher at ../lib/<triplet>/keyshare/ or /usr/lib/<triplet>/keyshare/.
ENGINE_DIR      = $(abspath $(P11_MODULE_DIR)/../keyshare)
P11_CONFIG_DIR  = $(shell pkg-config --variable=p11_module_configs p11-kit-1 2>/dev/null || echo /usr/share/p11-kit/modules)

.PHONY: all deps c-images thirdparty openssl-bundle openssl-update openssl-mode build test unit-test integration-test integration-test-agent integration-test-in-process \
        integration-test-in-process-subset test-cards unit-test-system-openssl demo install uninstall clean bench stress fuzz

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

## thirdparty: the public PKCS #11 suites (pkcs11test, p11test, crypto11, PyKCS11, python-pkcs11,
## pkcs11-tool) against keyshare in both modes and SoftHSM2, side by side (docs/pkcs11-conformance.md).
thirdparty: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(THIRDPARTY_PACKAGES)"
	@bash Tests/conformance/run-thirdparty.sh "$(KEYSHARE)" "$(MODULE)"

## openssl-bundle: fetch and lay out Debian 13's OpenSSL (only when OPENSSL resolves to bundled).
$(OPENSSL_STAMP): dist/openssl/fetch.sh | deps
	@rm -f $(OPENSSL_BUNDLE)/stamp-* $(CURDIR)/.build/release.yaml $(CURDIR)/.build/debug.yaml $(CURDIR)/.build/build.db
	@bash dist/openssl/fetch.sh "$(OPENSSL_BUNDLE)" "$(OPENSSL_DEB_VERSION)" \
	  "$(OPENSSL_DEB_SHA256_DEV)" "$(OPENSSL_DEB_SHA256_LEGACY)"
	@touch $@

openssl-bundle: $(OPENSSL_STAMP)

## openssl-update VERSION=x.y.z: pin the newest Debian 13 revision of OpenSSL x.y.z (OPENSSL_DEB_VERSION and
## its two checksums above) in one step: dist/openssl/update.sh downloads both packages through a private
## apt that checks Debian's signatures, computes their SHA-256 and rewrites those three lines (nothing is
## changed on any failure). OPENSSL_UPDATE_DRY_RUN=1 prints the new lines instead. Then: make build, test,
## deb (docs/packaging.md, "The bundled OpenSSL"). Tested by Tests/integration/94-doctor.sh on a local mirror.
OPENSSL_UPDATE_FILE ?= $(CURDIR)/Makefile
openssl-update:
	@test "$(origin VERSION)" = "command line" || { echo "openssl-update: give the OpenSSL version: make openssl-update VERSION=x.y.z" >&2; exit 1; }
	@bash dist/openssl/update.sh "$(OPENSSL_UPDATE_FILE)" "$(VERSION)" "$(OPENSSL_BUNDLE)"

## openssl-mode: clang's cached COpenSSL module is keyed without the -I paths, so after a switch
## between the bundled and the system OpenSSL it would keep the other one's headers (seen: a system
## build that still believed it was bundled); and SwiftPM keeps its build plan (release.yaml,
## build.db), whose pkg-config flags then stay the old mode's (seen: `make build` after a plain
## `swift build` kept the system libcrypto, up to date in 0.2 s). A switch therefore drops the
## module caches and the plans, so everything is planned, compiled and linked for the new mode.
OPENSSL_MODE_STAMP := $(CURDIR)/.build/openssl-mode
openssl-mode:
	@mkdir -p $(CURDIR)/.build
	@if [ "$$(cat $(OPENSSL_MODE_STAMP) 2>/dev/null)" != "$(OPENSSL_MODE)" ]; then \
	  rm -rf $(CURDIR)/.build/*/release/ModuleCache $(CURDIR)/.build/*/debug/ModuleCache \
	    $(CURDIR)/.build/release.yaml $(CURDIR)/.build/debug.yaml $(CURDIR)/.build/build.db; \
	  echo "$(OPENSSL_MODE)" > $(OPENSSL_MODE_STAMP); fi

## build: the engine (libkeyshare-engine.so: the Swift layers, the Swift runtime and the bundled OpenSSL
## linked in, so it is self-contained), then the module and the launcher (c-images). With the bundled
## OpenSSL, its legacy provider is copied next to the engine (keyshare-ossl-modules/).
build: deps $(OPENSSL_DEP) openssl-mode
	@echo "OpenSSL: $(OPENSSL_MODE) ($(if $(filter bundled,$(OPENSSL_MODE)),$(OPENSSL_DEB_VERSION) static,$(SYSTEM_OPENSSL) dynamic))"
	$(SWIFT) build $(BUILD_FLAGS) --product keyshare-engine
	@$(MAKE) --no-print-directory c-images
	@rm -rf $(BIN_DIR)/keyshare-ossl-modules
	@if [ "$(OPENSSL_MODE)" = bundled ]; then mkdir -p $(BIN_DIR)/keyshare-ossl-modules && \
	  cp $(OPENSSL_BUNDLE)/ossl-modules/legacy.so $(BIN_DIR)/keyshare-ossl-modules/; fi
	@echo "built $(KEYSHARE)"
	@echo "built $(ENGINE)"
	@echo "built $(MODULE)"

## The two C images (docs/architecture.md, "Images"): libkeyshare-pkcs11.so, what hosts load (the
## agent client; in-process mode loads the engine), and the `keyshare` launcher. Built with cc, not
## SwiftPM, whose swiftc link would put the Swift runtime into both. C_IMAGE_DIR and C_IMAGE_SAN
## (sanitizer flags, `make stress`/`make fuzz`) choose the build directory and the instrumentation.
C_IMAGE_DIR     ?= $(BIN_DIR)
C_IMAGE_SAN     ?=
C_IMAGE_CC      := $(if $(C_IMAGE_SAN),/opt/swift/usr/bin/clang,cc)
C_IMAGE_CFLAGS  := -std=gnu11 -O2 -g -Wall -Werror -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fcf-protection \
                   -Ipkcs11/types -Ipkcs11/abi/include -Ipkcs11/client/include -ISources/AgentProtocol/include
# (The Swift toolchain's clang, for the sanitizers, defaults to gold, which cannot pack relocations: lld.)
C_IMAGE_LDFLAGS := $(if $(C_IMAGE_SAN),-fuse-ld=lld) -Wl,-z,relro -Wl,-z,now -Wl,-z,pack-relative-relocs -Wl,--as-needed
CLIENT_SOURCES  := $(wildcard pkcs11/client/*.c) $(wildcard Sources/AgentProtocol/*.c)
CLIENT_HEADERS  := $(wildcard pkcs11/client/include/*.h pkcs11/abi/include/*.h pkcs11/types/*.h Sources/AgentProtocol/*.h Sources/AgentProtocol/include/*.h)
# A sanitized build makes the module only: the stress and fuzz runs use the normal launcher.
c-images: $(C_IMAGE_DIR)/libkeyshare-pkcs11.so $(if $(C_IMAGE_SAN),,$(C_IMAGE_DIR)/keyshare)
$(C_IMAGE_DIR)/libkeyshare-pkcs11.so: $(CLIENT_SOURCES) $(CLIENT_HEADERS) pkcs11/keyshare-pkcs11.map
	@mkdir -p $(@D)
	$(C_IMAGE_CC) $(C_IMAGE_CFLAGS) $(C_IMAGE_SAN) -fPIC -shared -o $@.tmp $(CLIENT_SOURCES) \
	  -Wl,--version-script=pkcs11/keyshare-pkcs11.map -Wl,-z,nodelete $(C_IMAGE_LDFLAGS) $(if $(C_IMAGE_SAN),,-Wl,-z,defs) -lpthread
	@mv -f $@.tmp $@
$(C_IMAGE_DIR)/keyshare: Sources/Launcher/launcher.c
	@mkdir -p $(@D)
	$(C_IMAGE_CC) $(C_IMAGE_CFLAGS) $(C_IMAGE_SAN) -fPIE -pie -o $@.tmp $< $(C_IMAGE_LDFLAGS)
	@mv -f $@.tmp $@

unit-test: deps $(OPENSSL_DEP) openssl-mode
	$(SWIFT) test

## unit-test-system-openssl (issue 18): CI runs both OpenSSL builds. `make OPENSSL=system` (Debian 12's
## libcrypto 3.0: no post-quantum mechanisms) must keep compiling and passing the unit tests while the
## default build is the bundled 3.5. Built in a scratch path of its own (.build-system), with the
## caller's pkg-config path (never the bundle's), so the main build's plans, module caches and mode
## stamp are not touched: no replanning of .build either way. Everything is compiled (every target
## and test target, debug); the suites run are those whose code paths differ with the engine
## (KeyshareCrypto, Keychain, Tokens, PKCS11, the agent protocol): the CLI, sharing and TPM suites
## call the same engine through those layers and would add minutes for no other OpenSSL path.
## SYSTEM_TEST_FILTER= (empty) runs them all. Measured (issue 18): a first build 720 s wall on the shared
## 2 cores (load average 15; 3 min 20 s user CPU), the five suites 308 tests in 25 s; again after a
## change, 41 s. Where the main build already is the system one (OPENSSL=system, or a system >= 3.5)
## it is not repeated.
SYSTEM_SCRATCH     := $(CURDIR)/.build-system
SYSTEM_TEST_FILTER ?= KeyshareCryptoTests|KeychainTests|TokensTests|PKCS11Tests|AgentProtocolTests
ifeq ($(OPENSSL_MODE),system)
unit-test-system-openssl:
	@echo "unit-test-system-openssl: unit-test already ran the system-OpenSSL build"
else
unit-test-system-openssl: deps
	@echo "OpenSSL: system ($$(env PKG_CONFIG_PATH="$(SYSTEM_PKG_CONFIG_PATH)" pkg-config --modversion libcrypto) dynamic), in $(SYSTEM_SCRATCH)"
	env PKG_CONFIG_PATH="$(SYSTEM_PKG_CONFIG_PATH)" $(SWIFT) build --scratch-path $(SYSTEM_SCRATCH) --build-tests
	env PKG_CONFIG_PATH="$(SYSTEM_PKG_CONFIG_PATH)" $(SWIFT) test --scratch-path $(SYSTEM_SCRATCH) --skip-build \
	  $(if $(SYSTEM_TEST_FILTER),--filter '$(SYSTEM_TEST_FILTER)')
endif

## integration-test: every script in the default mode: the module is a client of the per-user agent
## (docs/agent.md), each script with its own agent.
integration-test: build
	@KEYSHARE_IT_SKIP=41-cards bash Tests/integration/run-all.sh "$(KEYSHARE)" "$(MODULE)"

## integration-test-agent: the same (the agent is the default); kept for scripts that name it.
integration-test-agent: integration-test

## The scripts `make test` also runs in the weaker in-process mode (KEYSHARE_IN_PROCESS=1). Those whose
## code path differs between the modes: the module's C ABI driven directly (50 pkcs11-tool, 51 ABI,
## 52 mechanisms, 54 faults and error order, 55 fork, 56 conformance, 68 symmetric, 69 digest/KDF,
## 70 asymmetric, 73 template attributes, whose arrays the agent rebuilds, 74 the 3.2 functions), and the store opened
## by the application itself (61 crash safety of in-process
## writers, 64 the PIN lockout counter shared by processes through the store). Not repeated: the
## CLI-only scripts (the CLI does not load the module: the same in both modes), the consumer
## scripts (53, 57-59: the same module paths as 50/52 through OpenSSL, NSS, OpenSSH, GnuTLS, Java,
## minutes each), 13 (the agent itself, with its own in-process control). 33 (post-quantum keys) and 44 (TPM keys through OpenSSL,
## OpenSSH, GnuTLS) are repeated: in-process the consumer's own process opens the TPM (in agent mode only
## the agent does), under 60 s. 34-pq-cli (post-quantum CLI and cross-checks) is repeated for its
## ML-DSA signature and ML-KEM decapsulation through the module (c/pqmodule.c), about 15 s. 45 (key
## attestation) is repeated: in-process the module itself certifies a C_GenerateKeyPair key, about 20 s.
IN_PROCESS_SUBSET := 33 34 44 45 50 51 52 54 55 56 61 64 68 69 70 73 74
integration-test-in-process-subset: build
	@KEYSHARE_IN_PROCESS=1 KEYSHARE_IT_ONLY="$(IN_PROCESS_SUBSET)" bash Tests/integration/run-all.sh "$(KEYSHARE)" "$(MODULE)"

## integration-test-in-process: every script in the in-process mode (KEYSHARE_IN_PROCESS=1; weaker, opt-in).
integration-test-in-process: build
	@KEYSHARE_IN_PROCESS=1 KEYSHARE_IT_SKIP=41-cards bash Tests/integration/run-all.sh "$(KEYSHARE)" "$(MODULE)"

## pq-crosscheck-venv: dilithium-py and kyber-py (pure-Python ML-DSA / ML-KEM, pinned by hash) for
## 34-pq-cli.sh's cross-checks; the script makes the same venv itself when it is missing.
PQ_VENV := $(CURDIR)/.build/pq-crosscheck-venv
PQ_REQUIREMENTS := Tests/integration/support/pq-crosscheck-requirements.txt
.PHONY: pq-crosscheck-venv
pq-crosscheck-venv: $(PQ_VENV)/stamp
$(PQ_VENV)/stamp: $(PQ_REQUIREMENTS) | deps
	@rm -rf $(PQ_VENV) && python3 -m venv $(PQ_VENV)
	@$(PQ_VENV)/bin/pip install -q --disable-pip-version-check --require-hashes --no-deps --only-binary :all: -r $(PQ_REQUIREMENTS)
	@touch $@

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

## test: every test: unit tests, the integration scripts against the real consumers in the default (agent)
## mode, the in-process subset, the smart-card stack; and the unit tests of the system-OpenSSL build.
test: unit-test unit-test-system-openssl integration-test integration-test-in-process-subset test-cards

## demo: the main job on a throwaway store under ./demo (or $$KEYSHARE_HOME).
demo: build
	@bash Tests/integration/demo.sh "$(KEYSHARE)" "$(MODULE)"

## bench: keyshare's module (through its agent; BENCH_IN_PROCESS=1 for in-process) vs SoftHSM2 vs raw OpenSSL,
## one table (docs/benchmarks.md); BENCH_SMOKE=1 for a quick run.
BENCH_BIN := Benchmarks/p11bench
## The raw-OpenSSL column links the libcrypto the engine links (issue 13: same engine on both sides):
## the bundle, statically, when OPENSSL_MODE=bundled (PKG_CONFIG_PATH above; Benchmarks/glibc_shim.c
## supplies the one glibc 2.38 symbol its archive needs), the system one otherwise. Rebuilt every
## time (a second's compile) so a switch of OPENSSL_MODE never leaves a binary of the other mode.
## BENCH_MODULE_OPENSSL tells p11bench what the module runs, for its header line.
BENCH_MODULE_OPENSSL := $(if $(filter bundled,$(OPENSSL_MODE)),bundled $(OPENSSL_DEB_VERSION) static,system $(SYSTEM_OPENSSL) dynamic)
$(BENCH_BIN): Benchmarks/p11bench.c Benchmarks/glibc_shim.c $(OPENSSL_DEP) openssl-mode
	$(CC) -O2 -Wall $$(pkg-config --cflags libcrypto) -I/usr/include/p11-kit-1 $$(pkg-config --cflags p11-kit-1 2>/dev/null) \
	  -DBENCH_RAW_LINK='"$(OPENSSL_MODE)"' -o $@ $< Benchmarks/glibc_shim.c $$(pkg-config --libs libcrypto) -lsqlite3 -ldl -lpthread

## The post-quantum rows (issue 18): linked with the OpenSSL the module carries, for its raw column.
PQBENCH_BIN := Benchmarks/pqbench
PQBENCH_CRYPTO = $(if $(filter bundled,$(OPENSSL_MODE)),-I$(OPENSSL_BUNDLE)/include -L$(OPENSSL_BUNDLE)/lib \
  -lkeyshare-crypto35 -lzstd -lz -lbrotlienc -lbrotlidec,-lcrypto)
$(PQBENCH_BIN): Benchmarks/pqbench.c $(OPENSSL_DEP)
	$(CC) -O2 -Wall -I/usr/include/p11-kit-1 -o $@ $< $(PQBENCH_CRYPTO) -ldl -lpthread

bench: build $(BENCH_BIN) $(PQBENCH_BIN)
	@BENCH_MODULE_OPENSSL="$(BENCH_MODULE_OPENSSL)" BENCH_AGENT=$${BENCH_AGENT:-1} bash Benchmarks/run.sh "$(KEYSHARE)" "$(MODULE)" "$(BENCH_BIN)"
	@bash Benchmarks/nginx.sh "$(KEYSHARE)" "$(MODULE)"
	@bash Benchmarks/tpm.sh "$(KEYSHARE)" "$(MODULE)"

## stress: long reliability runs (docs/reliability.md): 4 processes x 2 threads x 1000 operations with the
## CLI alongside, 200 SIGKILLs, 100 forks with 4 busy threads, the password-service exec races 25 times
## each (issue 12), 50 smart-card insert/remove cycles per event path (docs/benchmarks.md), 20 kill -9
## of the agent under a 4-process mixed load for 60 s (issue 16), and the
## in-process run under ThreadSanitizer (module in .build-tsan).
SANITIZE := KEYSHARE_SANITIZE=1 $(SWIFT) build -c release
stress: build $(CARD_BRIDGE)
	@bash Tests/stress/stress.sh "$(KEYSHARE)" "$(MODULE)" 4 2 1000 20
	@CARD_CYCLES=50 VCAC_BRIDGE=$(abspath $(CARD_BRIDGE)) bash Tests/integration/41-cards.sh "$(KEYSHARE)" "$(MODULE)"
	@bash Tests/stress/crash.sh "$(KEYSHARE)" "$(MODULE)" 200
	@RACE_RUNS=25 bash Tests/integration/21-share-hardening.sh "$(KEYSHARE)" "$(MODULE)"
	@bash Tests/integration/55-fork.sh "$(KEYSHARE)" "$(MODULE)" 100
	@bash Tests/integration/77-agent-kill.sh "$(KEYSHARE)" "$(MODULE)" 4 60 20
	$(SANITIZE) --scratch-path .build-tsan -Xswiftc -sanitize=thread --product keyshare-engine
	@$(MAKE) --no-print-directory c-images C_IMAGE_DIR=$(CURDIR)/.build-tsan/release C_IMAGE_SAN="-fsanitize=thread"
	@rm -rf .build-tsan/release/keyshare-ossl-modules && cp -r $(BIN_DIR)/keyshare-ossl-modules .build-tsan/release/ 2>/dev/null || true
	@bash Tests/stress/tsan.sh "$(KEYSHARE)" .build-tsan/release/libkeyshare-pkcs11.so 4 1000

## fuzz: the C ABI sweep under ASan/LSan, then libFuzzer + ASan on the PKCS #12, X.509, password-request and
## module template/mechanism parsers, and on the agent's inputs (control requests; with UBSan too the call
## codec, the shared region, the hello and the gate): FUZZ_SECONDS each (default 450), two at a time
## (FUZZ_PARALLEL), FUZZ_SECONDS_<target> for one target, FUZZ_TARGETS for some (Tests/fuzz/run-fuzz.sh).
## Build in .build-fuzz.
fuzz: build
	$(SANITIZE) --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address --product keyshare-fuzz
	$(SANITIZE) --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address --product keyshare-engine
	@$(MAKE) --no-print-directory c-images C_IMAGE_DIR=$(CURDIR)/.build-fuzz/release C_IMAGE_SAN="-fsanitize=address"
	@rm -rf .build-fuzz/release/keyshare-ossl-modules && cp -r $(BIN_DIR)/keyshare-ossl-modules .build-fuzz/release/ 2>/dev/null || true
	@bash Tests/fuzz/abi-asan.sh "$(KEYSHARE)" .build-fuzz/release/libkeyshare-pkcs11.so
	@bash Tests/fuzz/run-fuzz.sh "$(KEYSHARE)" .build-fuzz/release

## ---- Packaging (issue 19; docs/packaging.md): version, man pages, completions, install, deb ----
# The one version is KeyshareVersion in Sources/KeyshareCrypto/Version.swift; it is parsed
# here, never written twice. VERSION_OVERRIDE changes only the Debian package's version
# (Tests/integration/95-package.sh builds a lower one to test upgrades).
VERSION_SWIFT := Sources/KeyshareCrypto/Version.swift
VERSION       := $(shell awk '/static let major:/ {M = $$NF} /static let minor:/ {m = $$NF} \
                   /static let patch:/ {p = $$NF} END {if (M != "" && m != "" && p != "") print M "." m "." p}' $(VERSION_SWIFT))
VERSION_OVERRIDE ?=
DEB_VERSION   := $(or $(VERSION_OVERRIDE),$(VERSION))
DEB_ARCH      := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR       ?= $(CURDIR)
DEB_FILE       = $(DEB_DIR)/keyshare_$(DEB_VERSION)_$(DEB_ARCH).deb
DEB_COMPRESS  ?= xz
DEB_BUILD     := $(CURDIR)/.build/deb
DEB_PACKAGES  += dpkg-dev binutils lintian man-db groff-base mandoc bash-completion zsh fish
# Generated files (man pages, completions); the date of the last commit, so a rebuild is identical.
GEN           := $(CURDIR)/.build/dist
SOURCE_DATE   := $(shell git log -1 --format=%ct 2>/dev/null || date +%s)

# Install layout. The module and its p11-kit file go where p11-kit looks (pkg-config),
# whatever PREFIX is: p11-kit reads no other directory. Everything else is under PREFIX.
BINDIR        = $(PREFIX)/bin
MANDIR        = $(PREFIX)/share/man
DOCDIR        = $(PREFIX)/share/doc/keyshare
USERUNITDIR   = $(PREFIX)/lib/systemd/user
BASHCOMPDIR   = $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR    = $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)
FISHCOMPDIR   = $(PREFIX)/share/fish/vendor_completions.d
DOCS          = README.md CHANGELOG.md $(wildcard docs/*.md) dist/debian/copyright
# Every systemd user unit in dist/systemd (the password service's; the agent's join here).
UNITS         = $(wildcard dist/systemd/*.service dist/systemd/*.socket)

.PHONY: man completions install install-files uninstall deb

## man: keyshare(1) and one page per subcommand (the argument parser's definitions and the
## hand-written sections of dist/man/commands), keyshare-pkcs11(7) and keyshare-security(7).
man: build
	@bash dist/man/generate.sh "$(KEYSHARE)" "$(GEN)/man" "$$(date -u -d @$(SOURCE_DATE) +%F)" "$(VERSION)"

## completions: bash, zsh and fish completion scripts from the argument parser; they ask the CLI
## (`keyshare ---completion`) for token labels and items (Sources/KeyshareCLI/StoreCompletion.swift).
completions: build
	@mkdir -p $(GEN)/completions
	@# A sourced file needs no #! line (lintian: bash-completion-with-hashbang).
	@$(KEYSHARE) --generate-completion-script bash | sed '1{/^#!/d}' > $(GEN)/completions/keyshare
	@$(KEYSHARE) --generate-completion-script zsh > $(GEN)/completions/_keyshare
	@$(KEYSHARE) --generate-completion-script fish > $(GEN)/completions/keyshare.fish
	@bash -n $(GEN)/completions/keyshare
	@! command -v zsh >/dev/null || zsh -n $(GEN)/completions/_keyshare
	@! command -v fish >/dev/null || fish -n $(GEN)/completions/keyshare.fish
	@grep -q '^complete .*-F _keyshare keyshare$$' $(GEN)/completions/keyshare
	@grep -q '^#compdef keyshare' $(GEN)/completions/_keyshare
	@grep -q "^complete -c 'keyshare'" $(GEN)/completions/keyshare.fish
	@echo "completions: bash, zsh, fish ($(GEN)/completions)"

## install: PREFIX (default /usr/local) and DESTDIR. The same files as the Debian package.
install: build man completions
	@$(MAKE) --no-print-directory install-files

# The copy itself, with no prerequisites: `install` and `deb` share it, so both install one set.
install-files:
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(P11_MODULE_DIR) $(DESTDIR)$(P11_CONFIG_DIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(DOCDIR) $(DESTDIR)$(USERUNITDIR) \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(KEYSHARE) $(DESTDIR)$(BINDIR)/keyshare
	install -m 0644 $(MODULE) $(DESTDIR)$(P11_MODULE_DIR)/libkeyshare-pkcs11.so
	install -d -m 0755 $(DESTDIR)$(ENGINE_DIR)
	install -m 0644 $(ENGINE) $(DESTDIR)$(ENGINE_DIR)/libkeyshare-engine.so
	install -m 0644 dist/p11-kit/keyshare.module $(DESTDIR)$(P11_CONFIG_DIR)/keyshare.module
	@# The bundled OpenSSL's legacy provider (issue 18), found next to the engine.
	@if [ -f $(BIN_DIR)/keyshare-ossl-modules/legacy.so ]; then set -e; \
	  install -d -m 0755 $(DESTDIR)$(ENGINE_DIR)/keyshare-ossl-modules; \
	  install -m 0644 $(BIN_DIR)/keyshare-ossl-modules/legacy.so $(DESTDIR)$(ENGINE_DIR)/keyshare-ossl-modules/legacy.so; \
	  echo "install legacy.so (bundled OpenSSL) -> $(DESTDIR)$(ENGINE_DIR)/keyshare-ossl-modules"; \
	fi
	install -m 0644 $(GEN)/man/man1/*.1.gz $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(GEN)/man/man7/*.7.gz $(DESTDIR)$(MANDIR)/man7/
	install -m 0644 $(GEN)/completions/keyshare $(DESTDIR)$(BASHCOMPDIR)/keyshare
	install -m 0644 $(GEN)/completions/_keyshare $(DESTDIR)$(ZSHCOMPDIR)/_keyshare
	install -m 0644 $(GEN)/completions/keyshare.fish $(DESTDIR)$(FISHCOMPDIR)/keyshare.fish
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	@set -e; for u in $(UNITS); do \
	  sed -e 's|@bindir@|$(BINDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@docdir@|$(DOCDIR)|g' $$u > $(DESTDIR)$(USERUNITDIR)/$${u##*/}; \
	  chmod 0644 $(DESTDIR)$(USERUNITDIR)/$${u##*/}; \
	  echo "install $$u -> $(DESTDIR)$(USERUNITDIR)/$${u##*/}"; \
	done

## uninstall: removes what install put there (same PREFIX and DESTDIR); users' stores are never touched.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/keyshare $(DESTDIR)$(P11_MODULE_DIR)/libkeyshare-pkcs11.so \
	  $(DESTDIR)$(P11_CONFIG_DIR)/keyshare.module \
	  $(DESTDIR)$(MANDIR)/man1/keyshare.1.gz $(DESTDIR)$(MANDIR)/man1/keyshare-*.1.gz \
	  $(DESTDIR)$(MANDIR)/man7/keyshare-*.7.gz \
	  $(DESTDIR)$(BASHCOMPDIR)/keyshare $(DESTDIR)$(ZSHCOMPDIR)/_keyshare $(DESTDIR)$(FISHCOMPDIR)/keyshare.fish \
	  $(addprefix $(DESTDIR)$(USERUNITDIR)/,$(notdir $(UNITS)))
	rm -rf $(DESTDIR)$(DOCDIR) $(DESTDIR)$(ENGINE_DIR)

## deb: keyshare_<version>_<arch>.deb in DEB_DIR (default: here), with dpkg-deb: `make install`'s
## files under /usr, stripped, Depends from dpkg-shlibdeps. VERSION_OVERRIDE=... for tests only.
deb: build man completions
	@test -n "$(VERSION)" || { echo "no version in $(VERSION_SWIFT)" >&2; exit 1; }
	rm -rf $(DEB_BUILD)
	@$(MAKE) --no-print-directory install-files DESTDIR=$(DEB_BUILD)/debian/keyshare PREFIX=/usr >/dev/null
	@cd $(DEB_BUILD) && SOURCE_DATE_EPOCH=$(SOURCE_DATE) bash $(CURDIR)/dist/debian/build-deb.sh \
	  "$(CURDIR)" "$(VERSION)" "$(DEB_VERSION)" "$(DEB_COMPRESS)" "$(DEB_FILE)"

clean:
	rm -rf .build .build-system demo
