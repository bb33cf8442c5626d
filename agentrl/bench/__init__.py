"""The bench room: ``agentrl bench`` and ``agentrl suite`` planned and supervised (runs in processes of
their own), and the value-fit benchmark's parts. It draws through callbacks the CLI gives."""
