namespace Demo.Widgets
{
    /// <summary>A widget that renders itself.</summary>
    [Serializable]
    public class Widget : Control
    {
        public Widget(string name) { Name = name; }

        /// <summary>Draws the widget.</summary>
        public void Render(Canvas canvas) { canvas.Draw(this); }
    }
}
