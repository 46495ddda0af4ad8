"""The evidence units a user may declare for a new set (issue 58), in place of the label-free decisions of
:mod:`mogg.run.budget.selector.set_shape`: ``frontier.routers.selector.transfer_unit`` for the report,
``mogg-route --evidence-unit`` when routing. Kept apart from those decisions so that ``mogg-route --help`` imports
nothing heavy."""

AUTO = "auto"  # the decisions read the candidates (set_shape.whole_shape, set_shape.page_sections)
# document: whole short documents (set_shape.whole_set); section: sections of a page (set_shape.page_sections);
# sentence: neither, sentences of long documents read at the training sets' price of a token
UNITS = (AUTO, "document", "section", "sentence")
