"""LangGraph on coniti (extra ``coniti[langgraph]``): :class:`ConitiSaver`, a checkpointer whose
thread state is durable, replayable and audited like any coniti memory."""

from coniti.integrations.langgraph.checkpoint import ConitiSaver

__all__ = ["ConitiSaver"]
