// Hovering a token shows its id, label (-100: not trained on) and loss weight.
(() => {
  const tip = document.getElementById("tip");
  document.addEventListener("mouseover", (event) => {
    const token = event.target.closest ? event.target.closest(".tok") : null;
    if (!token) { tip.hidden = true; return; }
    let label = token.dataset.label === "-100" ? "-100 (not trained on)" : token.dataset.label;
    if (token.closest(".untrained")) label += " (the entry does not train)";
    const rest = token.classList.contains("cont") ? " · the rest of the character before" : "";
    tip.textContent = `id ${token.dataset.id} · label ${label} · weight ${token.dataset.weight}${rest}`;
    const box = token.getBoundingClientRect();
    tip.style.left = `${box.left + window.scrollX}px`;
    tip.style.top = `${box.bottom + window.scrollY + 4}px`;
    tip.hidden = false;
  });
})();
