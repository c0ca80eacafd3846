"""Front-ends: the Discord bot, the terminal REPL and scheduled (cron) prompts.

Each turns its own kind of input into turns of the agent and its replies into output; none
holds memory logic.
"""
