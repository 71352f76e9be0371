"""The operator's console: Vigil's pages as CloudWatch dashboard custom widgets.

A custom widget is a Lambda function the console invokes with the widget's parameters and a
``widgetContext``; it answers HTML, and ``<cwdb-action>`` elements in that HTML invoke a function
again when clicked. Here:

- ``markup``: the one way HTML is built (every text and attribute through ``html.escape``);
- ``controls``: a button as ``<cwdb-action>`` (the console) or a ``<form>`` (``vigil local up``);
- ``jobs_page``, ``tasks_page``, ``observers_page``, ``now_page``: a read of the page's data,
  then a pure renderer of it;
- ``actions``: the buttons, each the library call the CLI and the API make;
- ``widget``: an invocation in, the page (and an action's outcome) out.

Authorisation (docs/guides/console.md): the widget's invocation carries no caller identity (the
``widgetContext`` names the dashboard, widget and account, never the person), and no
credentials; Lambda checks the person's ``lambda:InvokeFunction``. So there are two functions:
the view function (read grants only) draws the pages, the operate function (the write grants)
runs the buttons; an operator allowed to invoke the view function only sees every page and has
every button refused by Lambda itself.
"""
