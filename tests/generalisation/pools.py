"""Slot alternatives several shapes share: names a user might pick (neutral ones included, so a finding
never rests on a name), loop headers over a loader, and where a model or a loader is built."""

MODEL = ("model", "net", "m", "clf", "predictor", "backbone")
LOADER = ("train_loader", "loader", "dl", "batches", "trainloader", "source")
OPTIMIZER = ("optimizer", "opt", "sgd", "o")
INPUT = ("images", "x", "inputs", "data", "a", "src")
TARGET = ("labels", "y", "targets", "target", "b", "tgt")
LOSS = ("loss", "l", "batch_loss", "objective")

# loop headers over `$loader` that unpack `$x, $y` (the loop variable forms users write)
HEADER = (
    "for $x, $y in $loader:",
    "for i, ($x, $y) in enumerate($loader):",
    "for $x, $y in tqdm($loader):",
    "for step, ($x, $y) in enumerate(tqdm($loader, desc='train')):",
    "for batch_idx, ($x, $y) in enumerate($loader, start=1):",
)

# a network: the module class is in the file, another file, torchvision, or a Sequential
NET_CLASS = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.body(x)
"""
