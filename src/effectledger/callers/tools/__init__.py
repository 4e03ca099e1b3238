"""The model-facing tools, one room: a ``propose_<action>`` tool per action with
``perform_proposal`` and ``operation_status`` (:mod:`.function_tools`, their definitions in
:mod:`.definitions`, rendered for each provider by :mod:`.formats`), the single dispatch tool
(:mod:`.dispatch`), the reviewer's tools (:mod:`.review`) and what each answer tells the model
(:mod:`.guidance`). MCP serves the same tools (:mod:`effectledger.callers.mcp`)."""
