"""ringbound where agents and gateways already are: one module per framework, each over the
same ``Assembler``, each needing its own extra and imported only when used. With no config,
each sizes the budget from the model it wraps (``_model.sized``): the framework's own model
data, then the models table; the provider from the model's class, system or route; the output
reserve from the request's ``max_tokens``.

- ``ringbound.integrations.langchain``: ``RingboundMiddleware`` for LangChain v1
  ``create_agent`` and ``pre_model_hook`` for LangGraph graphs (``ringbound[langchain]``);
  ``Assembler.assemble`` also takes LangChain message lists as they are.
- ``ringbound.integrations.openai_agents``: ``call_model_input_filter`` for the OpenAI Agents
  SDK's ``RunConfig`` (``ringbound[openai-agents]``).
- ``ringbound.integrations.pydantic_ai``: ``history_processor`` for Pydantic AI agents
  (``ringbound[pydantic-ai]``).
- ``ringbound.integrations.litellm``: ``RingboundHook``, a LiteLLM proxy pre-call hook for the
  chat, Anthropic messages and Responses routes (``ringbound[litellm]``).
"""
