"""ringbound where agents and gateways already are: one module per framework, each over the
same ``Assembler``, each needing its own extra and imported only when used.

- ``ringbound.integrations.litellm``: ``RingboundHook``, a LiteLLM proxy pre-call hook for the
  chat, Anthropic messages and Responses routes (``ringbound[litellm]``).
"""
